#include "plan.h"

#include <tjit/kit/grid.h>
#include <tjit/kit/rows.h>

namespace tjit::ops {

AddPlan plan_add(const AddInputs& in, const kit::DeviceFacts& /*device*/) {
  AddPlan plan;
  plan.has_alpha = in.has_alpha;
  // More than four non-mergeable dims: the broadcast inputs are materialised, then added flat.
  plan.materialise = !in.same_shape_contiguous && !in.collapsed;
  plan.flat = in.same_shape_contiguous || plan.materialise;
  plan.kernel = plan.flat ? kAddKernel : kAddStridedKernel;
  plan.programs = kit::blocks_for(in.numel, plan.block, "tjit::add");
  // Offsets go to 64 bits where the last block's or a strided input's can reach 2**31.
  plan.index64 = in.numel + plan.block > kit::kInt32Limit ||
                 (!plan.flat && (in.x_max_offset >= kit::kInt32Limit || in.y_max_offset >= kit::kInt32Limit));
  return plan;
}

namespace {

kit::PlanWriter describe(const kit::PlanQuery& q) {
  AddInputs in;
  in.numel = q.require("numel");
  in.same_shape_contiguous = q.get("same_shape_contiguous", 1) != 0;
  in.collapsed = q.get("collapsed", 1) != 0;
  in.x_max_offset = q.get("x_max_offset", 0);
  in.y_max_offset = q.get("y_max_offset", 0);
  in.has_alpha = q.get("has_alpha", 0) != 0;
  const AddPlan p = plan_add(in, q.device);
  kit::PlanWriter w(p.materialise ? "materialised" : p.flat ? "flat" : "strided");
  w.launch(p.kernel, {p.programs}, p.num_warps)
      .constexpr_flag("HAS_ALPHA", p.has_alpha)
      .constexpr_value("BLOCK", p.block)
      .constexpr_flag("INDEX_64", p.index64);
  return w;
}

const kit::RegisterPlan add_plan("add", &describe);

}  // namespace
}  // namespace tjit::ops
