#include <tjit/kit/formula_node.h>

namespace tjit::kit {

at::Tensor FormulaNode::saved(size_t i) const {
  // Unpacking an output needs this node as its grad_fn; Node's getptr hands out a new owner.
  return saved_[i].unpack(const_cast<FormulaNode*>(this)->getptr());
}

void attach_outputs(const NodePointer& node, std::initializer_list<const at::Tensor*> outputs) {
  for (const at::Tensor* t : outputs) {
    torch::autograd::set_history(*t, node);
  }
}

bool has_forward_grad(std::initializer_list<const at::Tensor*> inputs) {
  for (const at::Tensor* t : inputs) {
    if (t != nullptr && t->defined() && t->_fw_grad(/*level=*/0).defined()) {
      return true;
    }
  }
  return false;
}

at::Tensor tangent(const at::Tensor& t) { return t.defined() ? t._fw_grad(/*level=*/0) : at::Tensor(); }

at::Tensor tangent(const std::optional<at::Tensor>& t) { return t.has_value() ? tangent(*t) : at::Tensor(); }

at::Tensor primal(const at::Tensor& t) { return t.defined() ? t._fw_primal(/*level=*/0) : t; }

std::optional<at::Tensor> primal(const std::optional<at::Tensor>& t) {
  return t.has_value() ? std::optional(primal(*t)) : std::nullopt;
}

void set_tangent(const at::Tensor& output, const at::Tensor& t) {
  if (t.defined()) {
    output._set_fw_grad(t, /*level=*/0, /*is_inplace_op=*/false);
  }
}

}  // namespace tjit::kit
