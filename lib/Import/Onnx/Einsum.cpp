//===- Einsum.cpp - ONNX Einsum as transposes, reductions and matmuls -----===//
//
// Any equation, explicit ("ij,jk->ik") or implicit ("ij,jk"), with ellipses
// and repeated labels. Each operand first loses its repeated labels (a
// diagonal: the product with an identity mask, summed) and the labels no
// other operand nor the output has (summed). Then the operands are contracted
// left to right, each pair as one batched matmul: the labels both share and
// something later needs are the batch, the others they share are contracted,
// the rest are the rows and the columns. A last transpose gives the output's
// order. Gradients are the matmuls', reductions' and transposes'.
//
//===----------------------------------------------------------------------===//
#include "CompositeOps.h"
#include "Composer.h"

using namespace mlir;
using namespace pipe::onnx_import;
using llvm::SmallVector;

namespace {
using Labels = SmallVector<int>;

/// Label ids: a-z are 0-25, A-Z 26-51, the ellipsis dims 52 and up (the last
/// ellipsis dim of every operand is the same label, as in broadcasting).
constexpr int kEllipsisBase = 52;

int letterId(char ch) {
  if (ch >= 'a' && ch <= 'z')
    return ch - 'a';
  if (ch >= 'A' && ch <= 'Z')
    return ch - 'A' + 26;
  return -1;
}

/// One side of the equation: its letters, and where the ellipsis is (or -1).
struct Term {
  Labels letters;
  int ellipsisAt = -1;
};

FailureOr<Term> parseTerm(NodeImporter &n, llvm::StringRef text) {
  Term term;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.substr(i).starts_with("...")) {
      if (term.ellipsisAt >= 0)
        return n.error() << "Einsum term '" << text << "' has two ellipses";
      term.ellipsisAt = term.letters.size();
      i += 2;
      continue;
    }
    int id = letterId(text[i]);
    if (id < 0)
      return n.error() << "Einsum term '" << text << "' has '" << text[i]
                       << "', not a letter or an ellipsis";
    term.letters.push_back(id);
  }
  return term;
}

/// The term's labels for `ellipsisDims` ellipsis dims out of `total`.
Labels expand(const Term &term, int64_t ellipsisDims, int64_t total) {
  Labels labels;
  for (int i = 0; i <= static_cast<int>(term.letters.size()); ++i) {
    if (i == term.ellipsisAt)
      for (int64_t k = total - ellipsisDims; k < total; ++k)
        labels.push_back(kEllipsisBase + k);
    if (i < static_cast<int>(term.letters.size()))
      labels.push_back(term.letters[i]);
  }
  return labels;
}

/// An operand on the way: its value and the label of each dim.
struct Operand {
  Value value;
  Labels labels;
};

int64_t dimOf(const Operand &x, int position) {
  return cast<RankedTensorType>(x.value.getType()).getDimSize(position);
}

/// Sums the dims at `positions` away.
Operand sumOver(Composer &c, Operand x, llvm::ArrayRef<int64_t> positions) {
  if (positions.empty())
    return x;
  Labels kept;
  for (auto [i, label] : llvm::enumerate(x.labels))
    if (!llvm::is_contained(positions, static_cast<int64_t>(i)))
      kept.push_back(label);
  return {c.reduce("nn.reduce_sum", x.value, positions, false), kept};
}

/// Replaces each repeated label by its diagonal.
FailureOr<Operand> takeDiagonals(Composer &c, Operand x) {
  for (bool found = true; found;) {
    found = false;
    for (int p = 0; p < static_cast<int>(x.labels.size()) && !found; ++p)
      for (int q = p + 1; q < static_cast<int>(x.labels.size()) && !found; ++q) {
        if (x.labels[p] != x.labels[q])
          continue;
        found = true;
        const int64_t size = dimOf(x, p), rank = x.labels.size();
        if (dimOf(x, q) != size)
          return c.n.error() << "Einsum repeats a label over dims of " << size << " and "
                             << dimOf(x, q);
        Value rows = c.iota(size, rank, p), cols = c.iota(size, rank, q);
        Value same = c.op("nn.equal", {rows, cols});
        Value mask = c.cast(same, getElementTypeOrSelf(x.value.getType()));
        x.value = c.mul(x.value, mask);
        x = sumOver(c, x, {q});
      }
  }
  return x;
}

/// x transposed so that its labels come in `order`.
Operand arrange(Composer &c, Operand x, const Labels &order) {
  SmallVector<int64_t> perm;
  for (int label : order)
    perm.push_back(llvm::find(x.labels, label) - x.labels.begin());
  bool identity = llvm::equal(perm, llvm::seq<int64_t>(0, perm.size()));
  return {identity ? x.value : c.transpose(x.value, perm), order};
}

/// The product of the sizes of `labels` in `sizes`.
int64_t sizeOf(const Labels &labels, const llvm::DenseMap<int, int64_t> &sizes) {
  int64_t total = 1;
  for (int label : labels)
    total *= sizes.lookup(label);
  return total;
}

/// a and b contracted over their shared labels that `keep` does not hold.
Operand contract(Composer &c, const Operand &a, const Operand &b,
                 const llvm::DenseSet<int> &keep, const llvm::DenseMap<int, int64_t> &sizes) {
  Labels batch, summed, rows, cols;
  for (int label : a.labels) {
    if (!llvm::is_contained(b.labels, label))
      rows.push_back(label);
    else if (keep.contains(label))
      batch.push_back(label);
    else
      summed.push_back(label);
  }
  for (int label : b.labels)
    if (!llvm::is_contained(a.labels, label))
      cols.push_back(label);
  Labels left = batch, right = batch;
  left.append(rows.begin(), rows.end());
  left.append(summed.begin(), summed.end());
  right.append(summed.begin(), summed.end());
  right.append(cols.begin(), cols.end());
  Operand l = arrange(c, a, left), r = arrange(c, b, right);
  const int64_t bSize = sizeOf(batch, sizes), mSize = sizeOf(rows, sizes),
                kSize = sizeOf(summed, sizes), nSize = sizeOf(cols, sizes);
  Value lhs = c.reshape(l.value, {bSize, mSize, kSize});
  Value rhs = c.reshape(r.value, {bSize, kSize, nSize});
  Value product = c.op("nn.matmul", {lhs, rhs});
  Labels labels = batch;
  labels.append(rows.begin(), rows.end());
  labels.append(cols.begin(), cols.end());
  SmallVector<int64_t> shape;
  for (int label : labels)
    shape.push_back(sizes.lookup(label));
  return {c.reshape(product, shape), labels};
}

Values importEinsum(NodeImporter &n) {
  if (failed(n.expectInputs(1, 1u << 16)) ||
      failed(n.expectAttributes({{"equation", AttrKind::String, true}})))
    return failure();
  std::string equation;
  for (char ch : n.getString("equation", ""))
    if (ch != ' ')
      equation.push_back(ch);
  llvm::StringRef text(equation);
  auto [lhs, output] = text.split("->");
  const bool explicitOutput = text.contains("->");
  SmallVector<llvm::StringRef> termTexts;
  lhs.split(termTexts, ',');
  if (termTexts.size() != n.numInputs())
    return n.error() << "Einsum equation '" << equation << "' has " << termTexts.size()
                     << " terms for " << n.numInputs() << " inputs";
  // Labels and sizes; the ellipsis dims right-aligned across the operands.
  SmallVector<Term> terms;
  int64_t ellipsisDims = 0;
  for (auto [i, termText] : llvm::enumerate(termTexts)) {
    auto term = parseTerm(n, termText);
    auto type = rankedInput(n, i);
    if (failed(term))
      return failure();
    if (!type || !type.hasStaticShape())
      return n.error() << "Einsum input #" << i << " needs a static shape, got "
                       << n.input(i).getType();
    const int64_t extra = type.getRank() - static_cast<int64_t>(term->letters.size());
    if (extra < 0 || (extra > 0 && term->ellipsisAt < 0))
      return n.error() << "Einsum term '" << termText << "' does not fit input #" << i << " "
                       << n.input(i).getType();
    ellipsisDims = std::max(ellipsisDims, extra);
    terms.push_back(*term);
  }
  SmallVector<Operand> operands;
  llvm::DenseMap<int, int64_t> sizes;
  llvm::DenseMap<int, int> uses;
  for (auto [i, term] : llvm::enumerate(terms)) {
    auto type = rankedInput(n, i);
    Operand x{n.input(i),
              expand(term, type.getRank() - static_cast<int64_t>(term.letters.size()), ellipsisDims)};
    for (auto [d, label] : llvm::enumerate(x.labels)) {
      const int64_t size = type.getDimSize(d);
      auto [it, inserted] = sizes.try_emplace(label, size);
      if (!inserted && it->second != size) {
        if (label < kEllipsisBase || (size != 1 && it->second != 1))
          return n.error() << "Einsum label sizes differ: " << it->second << " and " << size
                           << " in input #" << i;
        it->second = std::max(it->second, size);
      }
    }
    Labels distinct(x.labels);
    llvm::sort(distinct);
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    for (int label : distinct)
      ++uses[label];
    operands.push_back(x);
  }
  Labels out;
  if (explicitOutput) {
    auto term = parseTerm(n, output);
    if (failed(term))
      return failure();
    out = expand(*term, term->ellipsisAt >= 0 ? ellipsisDims : 0, ellipsisDims);
    for (int label : out)
      if (!sizes.count(label))
        return n.error() << "Einsum output '" << output << "' has a label no input has";
  } else {
    for (int64_t k = 0; k < ellipsisDims; ++k)
      out.push_back(kEllipsisBase + k);
    Labels once;
    for (auto [label, count] : uses)
      if (count == 1 && label < kEllipsisBase &&
          llvm::count_if(operands, [&](const Operand &x) {
            return llvm::count(x.labels, label) == 1;
          }) == 1)
        once.push_back(label);
    llvm::sort(once);
    out.append(once.begin(), once.end());
  }
  Composer c(n);
  // Broadcast ellipsis dims of 1 to the full size.
  for (Operand &x : operands) {
    SmallVector<int64_t> full;
    bool grows = false;
    for (auto [d, label] : llvm::enumerate(x.labels)) {
      full.push_back(sizes.lookup(label));
      grows |= full.back() != dimOf(x, d);
    }
    if (grows) {
      Value shape = n.constantI64(full);
      x.value = c.op("nn.expand", {x.value, shape});
    }
  }
  // Diagonals, then the labels only one operand has and the output lacks.
  for (Operand &x : operands) {
    auto diagonal = takeDiagonals(c, x);
    if (failed(diagonal))
      return failure();
    x = *diagonal;
    SmallVector<int64_t> alone;
    for (auto [d, label] : llvm::enumerate(x.labels))
      if (uses.lookup(label) == 1 && !llvm::is_contained(out, label))
        alone.push_back(d);
    x = sumOver(c, x, alone);
  }
  Operand result = operands[0];
  for (size_t i = 1; i < operands.size(); ++i) {
    llvm::DenseSet<int> keep(out.begin(), out.end());
    for (size_t j = i + 1; j < operands.size(); ++j)
      keep.insert(operands[j].labels.begin(), operands[j].labels.end());
    result = contract(c, result, operands[i], keep, sizes);
  }
  if (out.empty() && !result.labels.empty()) {
    SmallVector<int64_t> all;
    for (size_t d = 0; d < result.labels.size(); ++d)
      all.push_back(d);
    result = sumOver(c, result, all);
  }
  return c.result(arrange(c, result, out).value);
}
} // namespace

void pipe::onnx_import::addEinsum(const AddOp &add) { add("Einsum", {12}, 12, importEinsum); }
