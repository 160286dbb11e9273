// Integer index expressions of the kernel IR: constants, named variables (loop indices, kernel
// parameters such as M, N, K, built-ins such as tid), and + - * / % min max < <= ==.
// The CUDA/HIP printers print them; the simulator and the hazard analysis evaluate them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace heddle::kir {

class IExpr {
 public:
  enum Op { Const, Var, Add, Sub, Mul, Div, Mod, CeilDiv, Min, Max, Lt, Le, Eq, And };

  IExpr() : IExpr(int64_t(0)) {}
  IExpr(int64_t v);  // NOLINT: implicit from integers on purpose
  IExpr(int v) : IExpr(int64_t(v)) {}
  static IExpr var(const std::string& name);

  Op op() const { return node_->op; }
  bool isConst() const { return node_->op == Const; }
  int64_t constValue() const { return node_->value; }
  const std::string& name() const { return node_->name; }

  // Evaluate with every variable bound; throws HeddleError naming an unbound variable.
  int64_t eval(const std::map<std::string, int64_t>& env) const;
  // Replace variables (e.g. loop index i -> i + p when cloning a pipelined loop).
  IExpr substitute(const std::map<std::string, IExpr>& subst) const;
  bool uses(const std::string& var) const;
  void collectVars(std::set<std::string>& out) const;  // every variable named
  bool usesThread() const;                             // names a thread built-in (isThreadBuiltin)
  std::string str() const;                             // C syntax, fully parenthesised only where needed

  // The expression flattened for repeated evaluation over numbered variables (slots): what eval
  // computes, without name lookups, and an error (division by zero, an unknown variable) as a
  // false return instead of an exception. For analyses that evaluate one expression many times.
  class Program {
   public:
    bool run(const int64_t* slots, int64_t& out) const;

   private:
    friend class IExpr;
    struct Step {
      Op op;
      int64_t value;  // Const: the value; Var: its slot (-1: unknown variable)
    };
    std::vector<Step> steps_;  // postorder
  };
  Program compile(const std::vector<std::string>& slots) const;

  friend IExpr operator+(const IExpr& a, const IExpr& b);
  friend IExpr operator-(const IExpr& a, const IExpr& b);
  friend IExpr operator*(const IExpr& a, const IExpr& b);
  friend IExpr operator/(const IExpr& a, const IExpr& b);
  friend IExpr operator%(const IExpr& a, const IExpr& b);
  friend IExpr ceilDiv(const IExpr& a, const IExpr& b);
  friend IExpr min(const IExpr& a, const IExpr& b);
  friend IExpr max(const IExpr& a, const IExpr& b);
  friend IExpr operator<(const IExpr& a, const IExpr& b);
  friend IExpr operator<=(const IExpr& a, const IExpr& b);
  friend IExpr operator&&(const IExpr& a, const IExpr& b);
  friend IExpr eq(const IExpr& a, const IExpr& b);

 private:
  struct Node {
    Op op = Const;
    int64_t value = 0;
    std::string name;
    std::shared_ptr<const Node> a, b;
  };
  explicit IExpr(std::shared_ptr<const Node> n) : node_(std::move(n)) {}
  static IExpr make(Op op, const IExpr& a, const IExpr& b);
  std::shared_ptr<const Node> node_;
};

// The built-ins that differ between the threads of a block: tid, warp and lane (the printers
// declare them; the simulator and the interpreter bind them per thread).
bool isThreadBuiltin(const std::string& var);

// Parses "(i + 1) % 4", "N - 3", "max(N - 3, 0)", "tid < 32 && f": integers, names, + - * / %,
// min(a, b), max(a, b), < <= ==, && and
// parentheses (kir/parse.cpp).
IExpr parseIExpr(const std::string& text);

}  // namespace heddle::kir
