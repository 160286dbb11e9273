"""Fixtures of the torch.compile backend tests (tests/torch/test_dynamo*.py); the helpers they import are in
tests/support/dynamo_defs.py.
  * ``_fresh_dynamo`` -- reset dynamo and heddle's backend statistics around a test; the modules that want it
    ask for it with ``pytestmark = pytest.mark.usefixtures("_fresh_dynamo")`` (not autouse: the other modules
    of this folder keep dynamo's state as they did)
"""
import pytest
import torch

import heddle.dynamo as hd


@pytest.fixture
def _fresh_dynamo():
    torch._dynamo.reset()
    hd.reset_stats()
    yield
    torch._dynamo.reset()
