// Index expressions: construction with constant folding, evaluation, substitution, printing.
#include "heddle/kir/expr.h"

#include "heddle/ir/errors.h"

namespace heddle::kir {

IExpr::IExpr(int64_t v) {
  auto n = std::make_shared<Node>();
  n->op = Const;
  n->value = v;
  node_ = n;
}

IExpr IExpr::var(const std::string& name) {
  auto n = std::make_shared<Node>();
  n->op = Var;
  n->name = name;
  return IExpr(std::shared_ptr<const Node>(n));
}

static int64_t floorDivPos(int64_t a, int64_t b) { return a / b; }

// a op b; false for a zero divisor (apply throws; Program::run reports it)
static bool applyChecked(IExpr::Op op, int64_t a, int64_t b, int64_t& out) {
  if ((op == IExpr::Div || op == IExpr::Mod || op == IExpr::CeilDiv) && b == 0) return false;
  switch (op) {
    case IExpr::Add: out = a + b; break;
    case IExpr::Sub: out = a - b; break;
    case IExpr::Mul: out = a * b; break;
    case IExpr::Div: out = floorDivPos(a, b); break;
    case IExpr::Mod: out = a % b; break;
    case IExpr::CeilDiv: out = (a + b - 1) / b; break;
    case IExpr::Min: out = a < b ? a : b; break;
    case IExpr::Max: out = a > b ? a : b; break;
    case IExpr::Lt: out = a < b; break;
    case IExpr::Le: out = a <= b; break;
    case IExpr::Eq: out = a == b; break;
    case IExpr::And: out = a && b; break;
    default: out = 0; break;
  }
  return true;
}

static int64_t apply(IExpr::Op op, int64_t a, int64_t b) {
  int64_t r;
  if (!applyChecked(op, a, b, r))
    throw HeddleError(op == IExpr::Mod ? "index expression takes a remainder by zero"
                                       : "index expression divides by zero");
  return r;
}

IExpr::Program IExpr::compile(const std::vector<std::string>& slots) const {
  Program p;
  std::function<void(const Node&)> emit = [&](const Node& n) {
    if (n.op == Const) {
      p.steps_.push_back({Const, n.value});
    } else if (n.op == Var) {
      int64_t s = -1;
      for (size_t i = 0; i < slots.size(); ++i)
        if (slots[i] == n.name) s = int64_t(i);
      p.steps_.push_back({Var, s});
    } else {
      emit(*n.a), emit(*n.b);
      p.steps_.push_back({n.op, 0});
    }
  };
  emit(*node_);
  return p;
}

bool IExpr::Program::run(const int64_t* slots, int64_t& out) const {
  int64_t stack[64];
  std::vector<int64_t> big;  // expressions deeper than the fixed stack
  int64_t* st = stack;
  if (steps_.size() > 64) big.resize(steps_.size()), st = big.data();
  size_t sp = 0;
  for (auto& s : steps_) {
    if (s.op == Const) {
      st[sp++] = s.value;
    } else if (s.op == Var) {
      if (s.value < 0) return false;
      st[sp++] = slots[s.value];
    } else {
      --sp;
      if (!applyChecked(s.op, st[sp - 1], st[sp], st[sp - 1])) return false;
    }
  }
  out = st[0];
  return true;
}

IExpr IExpr::make(Op op, const IExpr& a, const IExpr& b) {
  if (a.isConst() && b.isConst()) return IExpr(apply(op, a.constValue(), b.constValue()));
  // light simplification keeps printed code and dumps readable
  if (op == Add && a.isConst() && a.constValue() == 0) return b;
  if ((op == Add || op == Sub) && b.isConst() && b.constValue() == 0) return a;
  if (op == Mul && ((a.isConst() && a.constValue() == 0) || (b.isConst() && b.constValue() == 0))) return IExpr(0);
  if (op == Mul && a.isConst() && a.constValue() == 1) return b;
  if ((op == Mul || op == Div) && b.isConst() && b.constValue() == 1) return a;
  if (op == Mod && b.isConst() && b.constValue() == 1) return IExpr(0);
  auto n = std::make_shared<Node>();
  n->op = op;
  n->a = a.node_;
  n->b = b.node_;
  return IExpr(std::shared_ptr<const Node>(n));
}

int64_t IExpr::eval(const std::map<std::string, int64_t>& env) const {
  switch (node_->op) {
    case Const: return node_->value;
    case Var: {
      auto it = env.find(node_->name);
      if (it == env.end()) throw HeddleError("index expression uses unbound variable '" + node_->name + "'");
      return it->second;
    }
    default: return apply(node_->op, IExpr(node_->a).eval(env), IExpr(node_->b).eval(env));
  }
}

IExpr IExpr::substitute(const std::map<std::string, IExpr>& s) const {
  switch (node_->op) {
    case Const: return *this;
    case Var: {
      auto it = s.find(node_->name);
      return it == s.end() ? *this : it->second;
    }
    default: return make(node_->op, IExpr(node_->a).substitute(s), IExpr(node_->b).substitute(s));
  }
}

bool IExpr::uses(const std::string& v) const {
  if (node_->op == Var) return node_->name == v;
  if (node_->op == Const) return false;
  return IExpr(node_->a).uses(v) || IExpr(node_->b).uses(v);
}

void IExpr::collectVars(std::set<std::string>& out) const {
  if (node_->op == Var) out.insert(node_->name);
  if (node_->op == Var || node_->op == Const) return;
  IExpr(node_->a).collectVars(out);
  IExpr(node_->b).collectVars(out);
}

bool isThreadBuiltin(const std::string& v) { return v == "tid" || v == "warp" || v == "lane"; }

bool IExpr::usesThread() const {
  std::set<std::string> vs;
  collectVars(vs);
  for (auto& v : vs)
    if (isThreadBuiltin(v)) return true;
  return false;
}

static int prec(IExpr::Op op) {
  switch (op) {
    case IExpr::Mul:
    case IExpr::Div:
    case IExpr::Mod: return 5;
    case IExpr::Add:
    case IExpr::Sub: return 4;
    case IExpr::Lt:
    case IExpr::Le: return 3;
    case IExpr::Eq: return 2;
    case IExpr::And: return 1;
    default: return 9;
  }
}

std::string IExpr::str() const {
  const Node& n = *node_;
  switch (n.op) {
    case Const: return std::to_string(n.value);
    case Var: return n.name;
    case CeilDiv: return "heddle_ceil_div(" + IExpr(n.a).str() + ", " + IExpr(n.b).str() + ")";
    case Min: return "heddle_min(" + IExpr(n.a).str() + ", " + IExpr(n.b).str() + ")";
    case Max: return "heddle_max(" + IExpr(n.a).str() + ", " + IExpr(n.b).str() + ")";
    default: break;
  }
  static const char* sym[] = {"", "", " + ", " - ", " * ", " / ", " % ", "", "", "", " < ", " <= ", " == ", " && "};
  auto side = [&](const std::shared_ptr<const Node>& c, bool right) {
    std::string s = IExpr(c).str();
    int pc = prec(c->op), pn = prec(n.op);
    bool paren = pc < pn || (right && pc == pn && n.op != Add && n.op != Mul);
    return paren ? "(" + s + ")" : s;
  };
  return side(n.a, false) + sym[n.op] + side(n.b, true);
}

IExpr operator+(const IExpr& a, const IExpr& b) { return IExpr::make(IExpr::Add, a, b); }
IExpr operator-(const IExpr& a, const IExpr& b) { return IExpr::make(IExpr::Sub, a, b); }
IExpr operator*(const IExpr& a, const IExpr& b) { return IExpr::make(IExpr::Mul, a, b); }
IExpr operator/(const IExpr& a, const IExpr& b) { return IExpr::make(IExpr::Div, a, b); }
IExpr operator%(const IExpr& a, const IExpr& b) { return IExpr::make(IExpr::Mod, a, b); }
IExpr ceilDiv(const IExpr& a, const IExpr& b) { return IExpr::make(IExpr::CeilDiv, a, b); }
IExpr min(const IExpr& a, const IExpr& b) { return IExpr::make(IExpr::Min, a, b); }
IExpr max(const IExpr& a, const IExpr& b) { return IExpr::make(IExpr::Max, a, b); }
IExpr operator<(const IExpr& a, const IExpr& b) { return IExpr::make(IExpr::Lt, a, b); }
IExpr operator<=(const IExpr& a, const IExpr& b) { return IExpr::make(IExpr::Le, a, b); }
IExpr operator&&(const IExpr& a, const IExpr& b) { return IExpr::make(IExpr::And, a, b); }
IExpr eq(const IExpr& a, const IExpr& b) { return IExpr::make(IExpr::Eq, a, b); }

}  // namespace heddle::kir
