#pragma once
// An operator's autograd graph node, built the way torch's own operators build theirs (their
// generated VariableType kernels): the Autograd kernel redispatches below autograd, then attaches
// a node whose backward is a plain function. Unlike a torch::autograd::Function, such a node works
// under torch.func's transforms (grad, vjp, jacrev, hessian): functorch unwraps and rewraps the
// tensors at the redispatch, and refuses C++ Functions because their forward calls the dispatcher
// from the top again.
//
// Use (see ops/csrc/ops/softmax/softmax.cpp):
//   at::Tensor out = op.redispatch(ks & c10::after_autograd_keyset, ...);
//   if (kit::records_graph({&self})) {
//     auto node = kit::make_formula_node("SoftmaxBackward", &softmax_input_grads, self);
//     kit::attach_outputs(*node, node, {&out});         // before saving outputs
//     node->save(out, /*is_output=*/true);
//     node->data.push_back(dim);
//   }
// The backward function gets the node (its saved tensors and data) and the output gradients
// (undefined for outputs nobody used) and returns one gradient per input given to
// make_formula_node, in order (undefined where none). It calls differentiable operators, so a
// backward recorded with create_graph=True is differentiable again.

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace tjit::kit {

// How this torch holds graph nodes (std::shared_ptr, or c10::intrusive_ptr in newer releases).
using NodePointer = decltype(std::declval<torch::autograd::Edge>().function);

class FormulaNode;
using BackwardFormula = torch::autograd::variable_list (*)(const FormulaNode& node,
                                                           torch::autograd::variable_list&& grads);

class FormulaNode final : public torch::autograd::Node {
 public:
  FormulaNode(const char* name, BackwardFormula backward) : name_(name), backward_(backward) {}

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    return backward_(*this, std::move(grads));
  }
  std::string name() const override { return name_; }
  void release_variables() override {
    for (auto& s : saved_) {
      s.reset_data();
    }
  }

  // Saves `t` (undefined allowed); an output of this node must be attached first and saved with
  // is_output=true (no reference cycle through its grad_fn).
  void save(const at::Tensor& t, bool is_output = false) { saved_.emplace_back(t, is_output); }
  at::Tensor saved(size_t i) const;
  // Whether the backward must compute the gradient of input `i` (its position in make_formula_node).
  bool wants(size_t i) const { return task_should_compute_output(i); }

  // The call's non-tensor arguments the backward needs (dims, shapes, dtypes, scalars).
  c10::SmallVector<c10::IValue, 4> data;

 private:
  const char* name_;
  BackwardFormula backward_;
  c10::SmallVector<torch::autograd::SavedVariable, 5> saved_;
};

// Both branches depend on N, so only the one this torch has is compiled.
template <typename N>
NodePointer new_node(const char* name, BackwardFormula backward) {
  if constexpr (std::is_same_v<NodePointer, std::shared_ptr<torch::autograd::Node>>) {
    return std::make_shared<N>(name, backward);
  } else {
    return c10::make_intrusive<N>(name, backward);
  }
}

// A node for `inputs` (tensors, optional tensors or pointers to tensors; one edge each, an empty
// one where a tensor is absent or needs no gradient).
template <typename... Inputs>
NodePointer make_formula_node(const char* name, BackwardFormula backward, const Inputs&... inputs) {
  NodePointer node = new_node<FormulaNode>(name, backward);
  node->set_next_edges(torch::autograd::collect_next_edges(inputs...));
  return node;
}

inline FormulaNode& formula(const NodePointer& node) { return static_cast<FormulaNode&>(*node); }

// `t`, or nullopt where it is undefined (an absent weight saved in a node, passed on to an
// operator's Tensor? argument).
inline std::optional<at::Tensor> defined_or_nullopt(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

// Makes `node` the grad_fn of each output, in order (output i receives gradient i). Outputs that
// are not differentiable (statistics, integer results) are simply not passed.
void attach_outputs(const NodePointer& node, std::initializer_list<const at::Tensor*> outputs);

// Whether a defined input carries a forward-mode tangent (torch.func.jvp, jacfwd, forward_ad).
bool has_forward_grad(std::initializer_list<const at::Tensor*> inputs);
// Its tangent, or an undefined tensor.
at::Tensor tangent(const at::Tensor& t);
at::Tensor tangent(const std::optional<at::Tensor>& t);
// The primal of a dual tensor (itself otherwise): what tangent formulas compute from, so that the
// tangent carries no tangent of its own.
at::Tensor primal(const at::Tensor& t);
std::optional<at::Tensor> primal(const std::optional<at::Tensor>& t);
// Gives `output` the tangent `t` (nothing when t is undefined).
void set_tangent(const at::Tensor& output, const at::Tensor& t);

}  // namespace tjit::kit
