// A small parser for index expressions ("(i + 1) % 4", "max(N - 3, 0)", "tid < 32 && f") used by hand-built
// test kernels.
#include <cctype>

#include "heddle/ir/errors.h"
#include "heddle/kir/expr.h"

namespace heddle::kir {

namespace {
struct Parser {
  const std::string& s;
  size_t i = 0;
  void ws() {
    while (i < s.size() && std::isspace((unsigned char)s[i])) ++i;
  }
  [[noreturn]] void bad(const char* what) { fail<HeddleError>("index expression '", s, "': ", what, " at ", i); }
  IExpr primary() {
    ws();
    if (i < s.size() && s[i] == '(') {
      ++i;
      IExpr e = conj();
      ws();
      if (i >= s.size() || s[i] != ')') bad("missing ')'");
      ++i;
      return e;
    }
    if (i < s.size() && std::isdigit((unsigned char)s[i])) {
      int64_t v = 0;
      while (i < s.size() && std::isdigit((unsigned char)s[i])) v = v * 10 + (s[i++] - '0');
      return IExpr(v);
    }
    if (i < s.size() && (std::isalpha((unsigned char)s[i]) || s[i] == '_')) {
      size_t b = i;
      while (i < s.size() && (std::isalnum((unsigned char)s[i]) || s[i] == '_')) ++i;
      std::string name = s.substr(b, i - b);
      ws();
      if ((name == "min" || name == "max") && i < s.size() && s[i] == '(') {  // min(a, b), max(a, b)
        ++i;
        IExpr x = sum();
        ws();
        if (i >= s.size() || s[i] != ',') bad("expected ',' in min/max");
        ++i;
        IExpr y = sum();
        ws();
        if (i >= s.size() || s[i] != ')') bad("missing ')'");
        ++i;
        return name == "min" ? min(x, y) : max(x, y);
      }
      return IExpr::var(name);
    }
    bad("expected a number, a name or '('");
  }
  IExpr product() {
    IExpr e = primary();
    for (;;) {
      ws();
      if (i >= s.size()) return e;
      char c = s[i];
      if (c != '*' && c != '/' && c != '%') return e;
      ++i;
      IExpr r = primary();
      e = c == '*' ? e * r : c == '/' ? e / r : e % r;
    }
  }
  IExpr cmp() {  // a < b, a <= b, a == b (no chains)
    IExpr e = sum();
    ws();
    if (i + 1 < s.size() && s[i] == '=' && s[i + 1] == '=') return i += 2, eq(e, sum());
    if (i + 1 < s.size() && s[i] == '<' && s[i + 1] == '=') return i += 2, e <= sum();
    if (i < s.size() && s[i] == '<') return ++i, e < sum();
    return e;
  }
  IExpr conj() {
    IExpr e = cmp();
    for (;;) {
      ws();
      if (i + 1 >= s.size() || s[i] != '&' || s[i + 1] != '&') return e;
      i += 2;
      e = e && cmp();
    }
  }
  IExpr sum() {
    IExpr e = product();
    for (;;) {
      ws();
      if (i >= s.size()) return e;
      char c = s[i];
      if (c != '+' && c != '-') return e;
      ++i;
      IExpr r = product();
      e = c == '+' ? e + r : e - r;
    }
  }
};
}  // namespace

IExpr parseIExpr(const std::string& text) {
  Parser p{text};
  IExpr e = p.conj();
  p.ws();
  if (p.i != text.size()) p.bad("unexpected character");
  return e;
}

}  // namespace heddle::kir
