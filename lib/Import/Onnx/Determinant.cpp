//===- Determinant.cpp - ONNX Det as Gaussian elimination -----------------===//
//
// Det of [..., n, n] is imported as n steps of Gaussian elimination with
// partial pivoting, written over the whole batch with masks:
//   - the pivot is the first row at or below k whose entry in column k has
//     the largest magnitude (a one-hot e over the rows);
//   - rows k and p are swapped by adding (e_k - e)(row_p - row_k), which is
//     nothing when p = k; a swap flips the sign;
//   - the rows below k lose their multiple of row k (a zero pivot means the
//     column is zero there, and the multiples are zero);
//   - the determinant is the signed product of the pivots.
// The gradient is that of the elimination's products and quotients, which is
// det(A) A^-T wherever A is invertible.
//
//===----------------------------------------------------------------------===//
#include "CompositeOps.h"
#include "Composer.h"

using namespace mlir;
using namespace pipe::onnx_import;
using llvm::SmallVector;

namespace {

/// A constant [n, 1] column of `element`, entry j being `value(j)`.
Value rowColumn(Composer &c, int64_t n, Type element, llvm::function_ref<double(int64_t)> value) {
  SmallVector<double> values;
  for (int64_t j = 0; j < n; ++j)
    values.push_back(value(j));
  return c.constantOf({n, 1}, values, element);
}

/// About 25 ops per elimination step: larger matrices are refused rather
/// than planned as thousands of ops.
constexpr int64_t kMaxOrder = 64;

Values importDet(NodeImporter &n) {
  if (failed(n.expectInputs(1, 1)) || failed(n.expectAttributes({})))
    return failure();
  auto type = rankedInput(n, 0);
  if (!type || !type.hasStaticShape() || !isa<FloatType>(type.getElementType()))
    return n.error() << "Det needs a static float input, got " << n.input(0).getType();
  const int64_t rank = type.getRank();
  if (rank < 2 || type.getDimSize(rank - 1) != type.getDimSize(rank - 2))
    return n.error() << "Det needs square matrices [..., n, n], got " << type;
  const int64_t order = type.getDimSize(rank - 1);
  if (order < 1 || order > kMaxOrder)
    return n.error() << "Det of " << order << "x" << order
                     << " matrices is not supported: it is imported as one elimination step "
                     << "per row, for orders 1 to " << kMaxOrder;
  SmallVector<int64_t> batchShape(type.getShape().drop_back(2));
  int64_t batch = 1;
  for (int64_t extent : batchShape)
    batch *= extent;
  Type element = type.getElementType();
  Composer c(n);
  Value a = c.reshape(n.input(0), {batch, order, order});
  Value zero = c.scalar(0, a), one = c.scalar(1, a), none = c.scalar(-1, a);
  Value rows = c.iota(order, 3, 1);
  Value det;
  for (int64_t k = 0; k < order; ++k) {
    if (k + 1 < order) {
      // The pivot row: the largest magnitude in column k at or below row k.
      Value column = c.unary("nn.abs", c.slice(a, 2, k, k + 1));
      Value atOrBelow = c.op("nn.greater_or_equal", {rows, c.n.constantI64({k}, true)});
      Value candidates = c.op("nn.where", {atOrBelow, column, none});
      Value pivotRow = extremeIndex(c, candidates, 1, /*maximum=*/true, /*last=*/false);
      Value e = c.cast(c.op("nn.equal", {rows, pivotRow}), element);
      Value ek = rowColumn(c, order, element, [&](int64_t j) { return j == k ? 1.0 : 0.0; });
      Value rowP = c.reduce("nn.reduce_sum", c.mul(e, a), {1}, true);
      Value rowK = c.slice(a, 1, k, k + 1);
      a = c.add(a, c.mul(c.sub(ek, e), c.sub(rowP, rowK)));
      // +1 when the pivot was row k, -1 after a swap.
      Value kept = c.slice(e, 1, k, k + 1);
      Value sign = c.sub(c.add(kept, kept), one);
      Value pivot = c.slice(c.slice(a, 1, k, k + 1), 2, k, k + 1);
      Value signedPivot = c.mul(pivot, sign);
      det = det ? c.mul(det, signedPivot) : signedPivot;
      // Eliminate below row k.
      Value isZero = c.op("nn.equal", {pivot, zero});
      Value divisor = c.op("nn.where", {isZero, one, pivot});
      Value below = rowColumn(c, order, element, [&](int64_t j) { return j > k ? 1.0 : 0.0; });
      Value factors = c.mul(c.div(c.slice(a, 2, k, k + 1), divisor), below);
      a = c.sub(a, c.mul(factors, c.slice(a, 1, k, k + 1)));
    } else {
      Value pivot = c.slice(c.slice(a, 1, k, k + 1), 2, k, k + 1);
      det = det ? c.mul(det, pivot) : pivot;
    }
  }
  return c.result(c.reshape(det, batchShape));
}
} // namespace

void pipe::onnx_import::addDeterminant(const AddOp &add) { add("Det", {11, 22}, 11, importDet); }
