// Findings: de-duplication, thread naming, and the readable report (see report.h).
#include "heddle/verify/report.h"

#include <algorithm>
#include <sstream>

namespace heddle::verify {

void Reports::add(Finding f, const std::string& key, const std::function<std::string()>& text, int64_t count) {
  total_ += count;
  int i = (int)f;
  auto it = index_[i].find(key);
  if (it != index_[i].end()) {
    lists_[i][it->second].count += count;
    return;
  }
  if ((int)lists_[i].size() >= max_) {
    dropped_[i] += count;
    return;
  }
  index_[i][key] = lists_[i].size();
  lists_[i].push_back({text(), count});
}

void Reports::into(SimResult& r) const {
  std::vector<std::string>* out[kFindingKinds] = {&r.races, &r.deadlocks, &r.asyncMisuse, &r.mismatches,
                                                  &r.barrierMisuse};
  for (int i = 0; i < kFindingKinds; ++i) {
    for (auto& e : lists_[i])
      out[i]->push_back(e.count > 1 ? e.text + " [" + std::to_string(e.count) + " occurrences]" : e.text);
    if (dropped_[i])
      out[i]->push_back("... and " + std::to_string(dropped_[i]) + " more finding(s) of other kinds or places");
  }
}

std::string threadName(int tid, int warpSize) {
  std::ostringstream os;
  os << "thread " << tid << " (warp " << tid / warpSize << ", lane " << tid % warpSize << ")";
  return os.str();
}

std::string threadSet(const std::vector<int>& tids) {
  std::vector<int> t = tids;
  std::sort(t.begin(), t.end());
  std::ostringstream os;
  os << (t.size() == 1 ? "thread " : "threads ");
  for (size_t i = 0; i < t.size();) {
    size_t j = i;
    while (j + 1 < t.size() && t[j + 1] == t[j] + 1) ++j;
    if (i) os << ", ";
    os << t[i];
    if (j > i) os << "-" << t[j];
    i = j + 1;
  }
  return os.str();
}

std::string SimResult::report() const {
  std::ostringstream os;
  os << "simulation (" << schedule << ", " << ctas << " CTA(s), " << steps
     << " steps): " << (ok() ? "no findings" : std::to_string(findings) + " finding(s)") << "\n";
  auto section = [&](const char* name, const std::vector<std::string>& l) {
    if (l.empty()) return;
    os << name << ":\n";
    for (auto& s : l) os << "  - " << s << "\n";
  };
  section("races", races);
  section("deadlocks", deadlocks);
  section("async misuse", asyncMisuse);
  section("mismatches", mismatches);
  section("barrier misuse", barrierMisuse);
  return os.str();
}

}  // namespace heddle::verify
