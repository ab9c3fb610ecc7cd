#pragma once
// tjit's operator kit: what tjit's own operators are built from, for libraries of operators of
// your own (docs/writing_operators.md). Link tjit::operators.

#include <tjit/kit/autograd.h>        // records_graph, typed_op, cuda_kernel_is_next
#include <tjit/kit/capture_safe.h>    // capture_safe (CUDA kernels registered for shared GPUs)
#include <tjit/kit/checks.h>          // check_defined, check_same_device, check_dtype_in, wrap_dim, ...
#include <tjit/kit/dtypes.h>          // accumulator_type
#include <tjit/kit/formula_node.h>    // FormulaNode, make_formula_node, attach_outputs, tangents (autograd, torch.func)
#include <tjit/kit/grid.h>            // blocks_for, ceil_div, next_power_of_2, planning_multiprocessors
#include <tjit/kit/kernel_files.h>    // find_kernel_dir
#include <tjit/kit/operator_docs.h>   // define (schema + doc)
#include <tjit/kit/outputs.h>         // empty_output
#include <tjit/kit/plan_choice.h>     // PlanCandidates: plans as measured choices (tables, first-call tuning)
#include <tjit/kit/plans.h>           // DeviceFacts, device_facts, Tuner, plan describers
#include <tjit/kit/row_exchange.h>    // row_exchange_workspace, long-row kernels' contract
#include <tjit/kit/rows.h>            // RowsView, as_rows, rows_of, needs_index64
#include <tjit/kit/vmap.h>            // VmapCall (torch.func.vmap batching rules)
// Not included here: <tjit/kit/library_kernels.h> (library_kernel_path), for libraries built with
// tjit_add_operator_library, which defines the macros it reads.
