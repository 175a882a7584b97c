// The syntax tree's release: a subtree freed from a worklist (see ~Expr in ast.h).
#include "tern/text/jinja/ast.h"

namespace tern::text::jinja {

Expr::~Expr() {
  std::vector<ExprPtr> pending;
  auto take_children = [&pending](Expr& e) {
    for (ExprPtr& c : e.items) {
      if (c) pending.push_back(std::move(c));
    }
    for (auto& kw : e.kwargs) {
      if (kw.second) pending.push_back(std::move(kw.second));
    }
    e.items.clear();
    e.kwargs.clear();
  };
  take_children(*this);
  while (!pending.empty()) {
    ExprPtr e = std::move(pending.back());
    pending.pop_back();
    take_children(*e);
  }  // e goes here with no children left to follow
}

}  // namespace tern::text::jinja
