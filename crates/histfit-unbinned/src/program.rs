//! The CPU evaluator of a [`Graph`]: a term of −ln L of the form
//!
//!   F(θ) = U(θ) − Σ_i w_i · E(x_i; θ)
//!
//! (U: the part that does not depend on the events — an extended likelihood's Σν, constraint
//! terms; E: each event's log-density) with its gradient by reverse-mode differentiation of the
//! graph. Nodes that do not vary with the events are evaluated once per point; the others over
//! blocks of [`BLOCK`] events, each block's forward and backward pass in place. Blocks run in
//! parallel and are summed in block order, so the result has the same bits on one thread or many.

use crate::graph::{eval_scalar, partials, Graph, Id, Op, Table};
use rayon::prelude::*;

/// Events per block: the block's buffers (one per varying node) stay in the core's cache.
pub const BLOCK: usize = 512;

/// Blocks per parallel task.
const BLOCKS_PER_TASK: usize = 16;

/// Events below which an evaluation runs on the calling thread: waking the pool's workers (and
/// their spinning while the optimiser works between evaluations, on a machine of few cores)
/// costs more than the split saves — on 2 cores, a 10k-event fit took 13 ms in parallel and
/// 3.3 ms on one thread.
const PARALLEL_EVENTS: usize = 32_768;

/// The compiled term U − Σ w E over one set of event columns.
#[derive(Debug, Clone)]
pub struct Program {
    ops: Vec<Op>,
    /// The graph's tables ([`Op::Hist`]).
    tables: Vec<Table>,
    /// Needed nodes that do not depend on the events, in order.
    uniform: Vec<u32>,
    /// Needed nodes that depend on the events, in order, and each one's buffer slot.
    varying: Vec<u32>,
    slot: Vec<u32>,
    /// Uniform nodes read by varying ones: where the blocks' adjoints land.
    boundary: Vec<u32>,
    /// The backward pass's view of each varying node (aligned with `varying`).
    steps: Vec<Step>,
    event: Id,
    uniform_term: Id,
    /// Graph columns the program reads.
    pub columns: Vec<usize>,
}

/// An argument of a varying node over one block: a buffer or a scalar.
#[derive(Clone, Copy)]
enum Src<'a> {
    V(&'a [f64]),
    S(f64),
}

impl Src<'_> {
    #[inline(always)]
    fn at(&self, i: usize) -> f64 {
        match self {
            Src::V(v) => v[i],
            Src::S(s) => *s,
        }
    }
}

const NONE: u32 = u32::MAX;

/// Whether blocks use AVX2 and FMA where the processor has them (tests switch it off to compare
/// bits).
static WIDE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Whether to run the wide build: allowed, and the processor has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
fn wide() -> bool {
    WIDE.load(std::sync::atomic::Ordering::Relaxed)
        && std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("fma")
}

impl Program {
    /// The program of U − Σ w E for the event term `event` and the uniform term `uniform`.
    pub fn new(graph: &Graph, event: Id, uniform: Id) -> Program {
        let need = graph.reachable(&[event, uniform]);
        let ops = graph.ops().to_vec();
        let tables = graph.tables().to_vec();
        let mut slot = vec![NONE; ops.len()];
        let (mut uni, mut var) = (Vec::new(), Vec::new());
        let mut columns = Vec::new();
        for (i, &needed) in need.iter().enumerate() {
            if !needed {
                continue;
            }
            if graph.varying(Id(i as u32)) {
                slot[i] = var.len() as u32;
                var.push(i as u32);
                if let Op::Column(j) = ops[i] {
                    columns.push(j);
                }
            } else {
                uni.push(i as u32);
            }
        }
        let mut boundary_index = vec![NONE; ops.len()];
        let mut boundary = Vec::new();
        for &v in &var {
            for a in ops[v as usize].args() {
                let a = a.0 as usize;
                if slot[a] == NONE && boundary_index[a] == NONE {
                    boundary_index[a] = boundary.len() as u32;
                    boundary.push(a as u32);
                }
            }
        }
        columns.sort_unstable();
        columns.dedup();
        // A node whose value no parameter moves (a column, a constant, a function of them)
        // takes no adjoint: the backward pass skips it.
        let mut moves = vec![false; ops.len()];
        for (i, op) in ops.iter().enumerate() {
            moves[i] = match op {
                Op::Param(_) => true,
                Op::Const(_) | Op::Column(_) => false,
                op => op.args().any(|a| moves[a.0 as usize]),
            };
        }
        let steps = var
            .iter()
            .map(|&v| {
                let op = ops[v as usize];
                let mut args = [Arg::Var(0); 3];
                let mut takes = [false; 3];
                for (m, a) in op.args().enumerate() {
                    let a = a.0 as usize;
                    args[m] = if slot[a] == NONE {
                        Arg::Uni(boundary_index[a])
                    } else {
                        Arg::Var(slot[a])
                    };
                    takes[m] = moves[a];
                }
                Step {
                    op,
                    moves: moves[v as usize] && !matches!(op, Op::Column(_)),
                    args,
                    takes,
                }
            })
            .collect();
        Program {
            steps,
            ops,
            tables,
            uniform: uni,
            varying: var,
            slot,
            boundary,
            event,
            uniform_term: uniform,
            columns,
        }
    }

    fn uniform_values(&self, params: &[f64]) -> Vec<f64> {
        let mut vals = vec![f64::NAN; self.ops.len()];
        for &i in &self.uniform {
            let i = i as usize;
            vals[i] = match self.ops[i] {
                Op::Param(p) => params[p],
                op => eval_scalar(op, &|a| vals[a.0 as usize], &self.tables),
            };
        }
        vals
    }

    /// The narrowest non-empty bin overlapping [lo, hi] of the histograms ([`Op::Hist`]) the program
    /// reads over graph column `column`, if it reads any: what a sampler's grid must resolve.
    pub fn narrowest_bin(&self, column: usize, lo: f64, hi: f64) -> Option<f64> {
        self.varying
            .iter()
            .filter_map(|&i| match self.ops[i as usize] {
                Op::Hist(a, t) if self.ops[a.0 as usize] == Op::Column(column) => {
                    Some(&self.tables[t as usize])
                }
                _ => None,
            })
            .flat_map(|t| t.edges().windows(2).zip(t.values()))
            // An empty bin holds no mass a grid could miss.
            .filter(|(w, &v)| w[1] > lo && w[0] < hi && v > 0.0)
            .map(|(w, _)| w[1] - w[0])
            .reduce(f64::min)
    }

    /// F(θ) for events `columns` (indexed by graph column; each of the events' length) with
    /// weights (1 where `None`); with `grad`, ∂F/∂θ added into it.
    pub fn eval(
        &self,
        params: &[f64],
        columns: &[&[f64]],
        weights: Option<&[f64]>,
        grad: Option<&mut [f64]>,
    ) -> f64 {
        let uni = self.uniform_values(params);
        let n = self.event_count(columns);
        let want_grad = grad.is_some();
        let (sum_we, boundary_adj) = if self.slot[self.event.0 as usize] == NONE {
            // An event term that does not depend on the events: E · Σ w.
            let sw = match weights {
                Some(w) => fixed_sum(w),
                None => n as f64,
            };
            (uni[self.event.0 as usize] * sw, Vec::new())
        } else {
            self.blocks(&uni, columns, weights, n, want_grad)
        };
        let value = uni[self.uniform_term.0 as usize] - sum_we;
        if let Some(grad) = grad {
            let mut adj = vec![0.0; self.ops.len()];
            adj[self.uniform_term.0 as usize] += 1.0;
            if self.slot[self.event.0 as usize] == NONE {
                let sw = match weights {
                    Some(w) => fixed_sum(w),
                    None => n as f64,
                };
                adj[self.event.0 as usize] -= sw;
            }
            for (k, &b) in self.boundary.iter().enumerate() {
                adj[b as usize] -= boundary_adj[k];
            }
            for &i in self.uniform.iter().rev() {
                let i = i as usize;
                let a = adj[i];
                if a == 0.0 {
                    continue;
                }
                match self.ops[i] {
                    Op::Param(p) => grad[p] += a,
                    op => {
                        let d = partials(op, uni[i], &|x| uni[x.0 as usize]);
                        for (k, x) in op.args().enumerate() {
                            if d[k] != 0.0 {
                                adj[x.0 as usize] += a * d[k];
                            }
                        }
                    }
                }
            }
        }
        value
    }

    /// E(x_i; θ) for every event (forward only): densities for plots, per-event checks.
    pub fn event_values(&self, params: &[f64], columns: &[&[f64]]) -> Vec<f64> {
        let uni = self.uniform_values(params);
        let n = self.event_count(columns);
        let e = self.event.0 as usize;
        if self.slot[e] == NONE {
            return vec![uni[e]; n];
        }
        let mut out = Vec::with_capacity(n);
        let mut s = Scratch::new(self.varying.len(), false);
        for start in (0..n).step_by(BLOCK) {
            let len = BLOCK.min(n - start);
            let at = Block::forward_only(&uni, columns, start, len);
            self.forward_any(at, &mut s);
            let o = self.slot[e] as usize * BLOCK;
            out.extend_from_slice(&s.vals[o..o + len]);
        }
        out
    }

    /// ∂E(x_i; θ)/∂θ_j for every event i and each parameter j of `which`, by forward-mode
    /// differentiation of the graph (one tangent pass per parameter): the per-event scores the
    /// sandwich estimate of weighted fits needs. Row j holds parameter `which[j]`'s column.
    pub fn event_jacobian(
        &self,
        params: &[f64],
        columns: &[&[f64]],
        which: &[usize],
    ) -> Vec<Vec<f64>> {
        let uni = self.uniform_values(params);
        let n = self.event_count(columns);
        let mut out = Vec::with_capacity(which.len());
        let mut s = Scratch::new(self.varying.len(), false);
        let mut tangent = vec![0.0; self.varying.len() * BLOCK];
        for &j in which {
            // Tangents of the uniform nodes (scalars).
            let mut ut = vec![0.0; self.ops.len()];
            for &i in &self.uniform {
                let i = i as usize;
                ut[i] = match self.ops[i] {
                    Op::Param(p) => f64::from(p == j),
                    op => {
                        let d = partials(op, uni[i], &|x| uni[x.0 as usize]);
                        op.args()
                            .enumerate()
                            .filter(|(k, _)| d[*k] != 0.0)
                            .map(|(k, x)| d[k] * ut[x.0 as usize])
                            .sum()
                    }
                };
            }
            let mut col = Vec::with_capacity(n);
            let e = self.event.0 as usize;
            for start in (0..n).step_by(BLOCK) {
                let len = BLOCK.min(n - start);
                if self.slot[e] == NONE {
                    col.extend(std::iter::repeat_n(ut[e], len));
                    continue;
                }
                let at = Block::forward_only(&uni, columns, start, len);
                self.forward_any(at, &mut s);
                for (k, &i) in self.varying.iter().enumerate() {
                    let op = self.ops[i as usize];
                    let vals = &s.vals;
                    let v = &vals[k * BLOCK..k * BLOCK + len];
                    let value_of = |a: Id, t: usize| -> f64 {
                        let sl = self.slot[a.0 as usize];
                        if sl == NONE {
                            uni[a.0 as usize]
                        } else {
                            vals[sl as usize * BLOCK + t]
                        }
                    };
                    for t in 0..len {
                        let mut dt = 0.0;
                        if !matches!(op, Op::Column(_)) {
                            let d = partials(op, v[t], &|x| value_of(x, t));
                            for (pos, a) in op.args().enumerate() {
                                if d[pos] == 0.0 {
                                    continue;
                                }
                                let sl = self.slot[a.0 as usize];
                                let ta = if sl == NONE {
                                    ut[a.0 as usize]
                                } else {
                                    tangent[sl as usize * BLOCK + t]
                                };
                                dt += d[pos] * ta;
                            }
                        }
                        tangent[k * BLOCK + t] = dt;
                    }
                }
                let o = self.slot[e] as usize * BLOCK;
                col.extend_from_slice(&tangent[o..o + len]);
            }
            out.push(col);
        }
        out
    }

    /// The forward pass of one block into the scratch buffers.
    #[inline(always)]
    fn forward_block(&self, at: Block<'_>, s: &mut Scratch) {
        let Block {
            uni,
            columns,
            start,
            len,
            ..
        } = at;
        for (k, &i) in self.varying.iter().enumerate() {
            let (before, rest) = s.vals.split_at_mut(k * BLOCK);
            let out = &mut rest[..len];
            let src = |a: Id| self.source(a, uni, before, len);
            forward(self.ops[i as usize], src, columns, &self.tables, start, out);
        }
    }

    /// Node `a` over a block of `len` events: its buffer in `buffers` where it varies, else
    /// its uniform value.
    fn source<'a>(&self, a: Id, uni: &[f64], buffers: &'a [f64], len: usize) -> Src<'a> {
        let j = self.slot[a.0 as usize];
        if j == NONE {
            Src::S(uni[a.0 as usize])
        } else {
            let o = j as usize * BLOCK;
            Src::V(&buffers[o..o + len])
        }
    }

    fn event_count(&self, columns: &[&[f64]]) -> usize {
        self.columns.first().map_or(0, |&j| columns[j].len())
    }

    /// Σ_i w_i E_i over every block, and (with `grad`) its derivative in each boundary node;
    /// per block in parallel, combined in block order.
    fn blocks(
        &self,
        uni: &[f64],
        columns: &[&[f64]],
        weights: Option<&[f64]>,
        n: usize,
        grad: bool,
    ) -> (f64, Vec<f64>) {
        let n_blocks = n.div_ceil(BLOCK);
        let nb = self.boundary.len();
        let task = |t: usize| -> Vec<(f64, Vec<f64>)> {
            let mut scratch = Scratch::new(self.varying.len(), grad);
            if grad {
                scratch.broadcast(&self.boundary, uni);
            }
            let lo = t * BLOCKS_PER_TASK;
            let hi = ((t + 1) * BLOCKS_PER_TASK).min(n_blocks);
            (lo..hi)
                .map(|b| {
                    let start = b * BLOCK;
                    let len = BLOCK.min(n - start);
                    let mut badj = vec![0.0; if grad { nb } else { 0 }];
                    let at = Block {
                        uni,
                        columns,
                        weights: weights.map(|w| &w[start..start + len]),
                        start,
                        len,
                    };
                    let s = self.block(at, &mut scratch, grad.then_some(&mut badj[..]));
                    (s, badj)
                })
                .collect()
        };
        let n_tasks = n_blocks.div_ceil(BLOCKS_PER_TASK);
        let parts: Vec<Vec<(f64, Vec<f64>)>> = if n_tasks > 1 && n >= PARALLEL_EVENTS {
            (0..n_tasks).into_par_iter().map(task).collect()
        } else {
            (0..n_tasks).map(task).collect()
        };
        let mut total = 0.0;
        let mut adj = vec![0.0; nb];
        for (s, b) in parts.iter().flatten() {
            total += s;
            for (a, x) in adj.iter_mut().zip(b) {
                *a += x;
            }
        }
        (total, adj)
    }

    /// One block (see [`block_body`](Self::block_body)), with AVX2's four-lane instructions
    /// and fused multiply-adds where the processor has them: the same operations in the same
    /// order, so the same bits (Rust contracts no multiply-add into an FMA by itself, and the
    /// ones written as `mul_add` round once either way), only wider.
    fn block(&self, at: Block<'_>, s: &mut Scratch, badj: Option<&mut [f64]>) -> f64 {
        #[cfg(target_arch = "x86_64")]
        if wide() {
            // SAFETY: the processor has AVX2 and FMA (checked just above).
            return unsafe { self.block_avx2(at, s, badj) };
        }
        self.block_body(at, s, badj)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn block_avx2(&self, at: Block<'_>, s: &mut Scratch, badj: Option<&mut [f64]>) -> f64 {
        self.block_body(at, s, badj)
    }

    /// [`forward_block`](Self::forward_block) in the wide build where the processor has it
    /// (for the callers outside a fit's evaluation: densities, per-event scores).
    fn forward_any(&self, at: Block<'_>, s: &mut Scratch) {
        #[cfg(target_arch = "x86_64")]
        if wide() {
            // SAFETY: the processor has AVX2 and FMA (checked just above).
            return unsafe { self.forward_avx2(at, s) };
        }
        self.forward_block(at, s)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn forward_avx2(&self, at: Block<'_>, s: &mut Scratch) {
        self.forward_block(at, s)
    }

    /// One block: forward over the varying nodes, Σ w E, and the backward pass into `badj`.
    #[inline(always)]
    fn block_body(&self, at: Block<'_>, s: &mut Scratch, badj: Option<&mut [f64]>) -> f64 {
        let Block { weights, len, .. } = at;
        self.forward_block(at, s);
        let e_off = self.slot[self.event.0 as usize] as usize * BLOCK;
        let e = &s.vals[e_off..e_off + len];
        let sum = match weights {
            Some(w) => fixed_dot(e, w),
            None => fixed_sum(e),
        };
        let Some(badj) = badj else {
            return sum;
        };
        let Scratch {
            vals,
            adj,
            written,
            ubuf,
        } = s;
        written.fill(false);
        let e_slot = self.slot[self.event.0 as usize] as usize;
        match weights {
            Some(w) => adj[e_off..e_off + len].copy_from_slice(w),
            None => adj[e_off..e_off + len].fill(1.0),
        }
        written[e_slot] = true;
        for (k, step) in self.steps.iter().enumerate().rev() {
            // A node no parameter moves, or one no later node read (adjoint 0), adds nothing.
            if !step.moves || !written[k] {
                continue;
            }
            let n_args = step.op.args().count();
            let mut x: [&[f64]; 3] = [&[]; 3];
            for (m, arg) in step.args.iter().enumerate().take(n_args) {
                x[m] = match *arg {
                    Arg::Var(j) => &vals[j as usize * BLOCK..j as usize * BLOCK + len],
                    Arg::Uni(b) => &ubuf[b as usize * BLOCK..b as usize * BLOCK + len],
                };
            }
            let (before, rest) = adj.split_at_mut(k * BLOCK);
            let node = Node {
                v: &vals[k * BLOCK..k * BLOCK + len],
                a: &rest[..len],
                x,
            };
            backward(step, node, before, written, badj);
        }
        sum
    }
}

/// A varying node as the backward pass sees it: the operation, whether any parameter moves
/// it, and where each argument lives and whether it takes an adjoint.
#[derive(Debug, Clone, Copy)]
struct Step {
    op: Op,
    moves: bool,
    args: [Arg; 3],
    takes: [bool; 3],
}

/// Where an argument of a varying node lives: a varying node's buffer slot, or a uniform
/// node's index among the boundary nodes (its broadcast buffer, its adjoint's sum).
#[derive(Debug, Clone, Copy)]
enum Arg {
    Var(u32),
    Uni(u32),
}

/// One varying node over a block: its values, its adjoints, its arguments' values.
struct Node<'a> {
    v: &'a [f64],
    a: &'a [f64],
    x: [&'a [f64]; 3],
}

/// The backward step of one varying node over a block: adjoint `a` of the node (value `v`)
/// times each partial derivative, added into each argument's adjoint — its buffer (the first
/// contribution a block makes assigns it, so no buffer is zeroed) or its boundary sum — one
/// loop per operation and argument, over the arguments' values `x`. An event whose adjoint is
/// 0 here (a branch a Select did not take) adds nothing, even where that branch's derivative is
/// not finite: the partial is computed for every event and discarded by a select, which
/// vectorises where a branch would not.
// The partials are written as they are: −1 times the adjoint reads as the rule it is.
#[allow(clippy::neg_multiply)]
#[inline(always)]
fn backward(step: &Step, node: Node<'_>, adj: &mut [f64], written: &mut [bool], badj: &mut [f64]) {
    let Node { v, a, x } = node;
    let n = a.len();
    let [x0, x1, _] = x;
    macro_rules! acc {
        ($m:expr, |$i:ident| $d:expr) => {{
            if step.takes[$m] {
                match step.args[$m] {
                    Arg::Var(j) => {
                        let o = j as usize * BLOCK;
                        let t = &mut adj[o..o + n];
                        if written[j as usize] {
                            for $i in 0..n {
                                let d = a[$i] * ($d);
                                t[$i] += if a[$i] != 0.0 { d } else { 0.0 };
                            }
                        } else {
                            for $i in 0..n {
                                let d = a[$i] * ($d);
                                t[$i] = if a[$i] != 0.0 { d } else { 0.0 };
                            }
                            written[j as usize] = true;
                        }
                    }
                    Arg::Uni(b) => {
                        // LANES partial sums, each over every LANES-th event, combined in a
                        // fixed tree: the loop vectorises (one running sum would chain every
                        // addition).
                        let mut lanes = [0.0; LANES];
                        let whole = n / LANES * LANES;
                        for c in 0..n / LANES {
                            for k in 0..LANES {
                                let $i = c * LANES + k;
                                let d = a[$i] * ($d);
                                lanes[k] += if a[$i] != 0.0 { d } else { 0.0 };
                            }
                        }
                        for (k, l) in lanes.iter_mut().enumerate().take(n - whole) {
                            let $i = whole + k;
                            let d = a[$i] * ($d);
                            *l += if a[$i] != 0.0 { d } else { 0.0 };
                        }
                        badj[b as usize] += combine(&lanes);
                    }
                }
            }
        }};
    }
    match step.op {
        Op::Add(_, _) => {
            acc!(0, |_i| 1.0);
            acc!(1, |_i| 1.0);
        }
        Op::Sub(_, _) => {
            acc!(0, |_i| 1.0);
            acc!(1, |_i| -1.0);
        }
        Op::Mul(_, _) => {
            acc!(0, |i| x1[i]);
            acc!(1, |i| x0[i]);
        }
        Op::Div(_, _) => {
            acc!(0, |i| 1.0 / x1[i]);
            acc!(1, |i| -v[i] / x1[i]);
        }
        Op::Pow(_, _) => {
            acc!(0, |i| x1[i] * x0[i].powf(x1[i] - 1.0));
            // x^y ln x → 0 as x → 0 (y > 0): 0 where the value is, not 0 · (−∞).
            acc!(1, |i| if v[i] == 0.0 {
                0.0
            } else {
                v[i] * crate::vmath::ln(x0[i])
            });
        }
        Op::Powi(_, 2) => acc!(0, |i| 2.0 * x0[i]),
        Op::Powi(_, k) => acc!(0, |i| k as f64 * x0[i].powi(k - 1)),
        Op::Neg(_) => acc!(0, |_i| -1.0),
        Op::Exp(_) => acc!(0, |i| v[i]),
        Op::Log(_) => acc!(0, |i| 1.0 / x0[i]),
        Op::Sqrt(_) => acc!(0, |i| 0.5 / v[i]),
        Op::Abs(_) => acc!(0, |i| x0[i].signum()),
        Op::Erf(_) => acc!(0, |i| {
            let t = x0[i];
            crate::graph::TWO_OVER_SQRT_PI * crate::vmath::exp(-t * t)
        }),
        Op::Sin(_) => acc!(0, |i| x0[i].cos()),
        Op::Cos(_) => acc!(0, |i| -x0[i].sin()),
        Op::Exprel(_) => acc!(0, |i| crate::graph::exprel_prime(x0[i])),
        Op::Lgamma(_) => acc!(0, |i| crate::graph::digamma(x0[i])),
        Op::LandauLnPdf(_) => acc!(0, |i| crate::landau::ln_pdf(x0[i]).1),
        Op::LandauCdf(_) => acc!(0, |i| crate::landau::pdf(x0[i])),
        Op::LandauSf(_) => acc!(0, |i| -crate::landau::pdf(x0[i])),
        Op::GammaP(_, _) => {
            acc!(0, |i| crate::graph::gamma_p(x0[i], x1[i]).1);
            acc!(1, |i| crate::graph::gamma_p_dy(x0[i], x1[i]));
        }
        // Piecewise constant: no derivative in x.
        Op::Hist(..) => {}
        Op::Select(..) => {
            acc!(1, |i| if x0[i] >= 0.0 { 1.0 } else { 0.0 });
            acc!(2, |i| if x0[i] >= 0.0 { 0.0 } else { 1.0 });
        }
        Op::Const(_) | Op::Param(_) | Op::Column(_) => {}
    }
}

/// Where a block lies: the uniform values, the event columns, the weights of its events (the
/// forward pass alone reads none), its first event and its length.
#[derive(Clone, Copy)]
struct Block<'a> {
    uni: &'a [f64],
    columns: &'a [&'a [f64]],
    weights: Option<&'a [f64]>,
    start: usize,
    len: usize,
}

impl<'a> Block<'a> {
    /// A block for a forward pass alone (per-event values, tangents): no weights.
    fn forward_only(uni: &'a [f64], columns: &'a [&'a [f64]], start: usize, len: usize) -> Self {
        Block {
            uni,
            columns,
            weights: None,
            start,
            len,
        }
    }
}

/// One block's buffers: values and adjoints of every varying node.
struct Scratch {
    vals: Vec<f64>,
    adj: Vec<f64>,
    /// Whether the block's backward pass has written each varying node's adjoint yet.
    written: Vec<bool>,
    /// Every boundary node's value broadcast over a block (filled once per evaluation), so
    /// that the backward loops read every argument as a slice and hold no branch.
    ubuf: Vec<f64>,
}

impl Scratch {
    fn new(n: usize, grad: bool) -> Scratch {
        Scratch {
            vals: vec![0.0; n * BLOCK],
            adj: vec![0.0; if grad { n * BLOCK } else { 0 }],
            written: vec![false; n],
            ubuf: Vec::new(),
        }
    }

    /// The boundary nodes' values broadcast, for a backward pass.
    fn broadcast(&mut self, boundary: &[u32], uni: &[f64]) {
        self.ubuf.clear();
        for &b in boundary {
            let v = uni[b as usize];
            self.ubuf.extend(std::iter::repeat_n(v, BLOCK));
        }
    }
}

/// One varying node over a block.
#[inline(always)]
fn forward<'a>(
    op: Op,
    src: impl Fn(Id) -> Src<'a>,
    columns: &[&[f64]],
    tables: &[Table],
    start: usize,
    out: &mut [f64],
) {
    let n = out.len();
    macro_rules! unary {
        ($a:expr, $f:expr) => {{
            let f = $f;
            match src($a) {
                Src::V(x) => {
                    for i in 0..n {
                        out[i] = f(x[i]);
                    }
                }
                Src::S(x) => out.fill(f(x)),
            }
        }};
    }
    macro_rules! binary {
        ($a:expr, $b:expr, $f:expr) => {{
            let f = $f;
            match (src($a), src($b)) {
                (Src::V(x), Src::V(y)) => {
                    for i in 0..n {
                        out[i] = f(x[i], y[i]);
                    }
                }
                (Src::V(x), Src::S(y)) => {
                    for i in 0..n {
                        out[i] = f(x[i], y);
                    }
                }
                (Src::S(x), Src::V(y)) => {
                    for i in 0..n {
                        out[i] = f(x, y[i]);
                    }
                }
                (Src::S(x), Src::S(y)) => out.fill(f(x, y)),
            }
        }};
    }
    match op {
        Op::Column(j) => out.copy_from_slice(&columns[j][start..start + n]),
        Op::Add(a, b) => binary!(a, b, |x: f64, y: f64| x + y),
        Op::Sub(a, b) => binary!(a, b, |x: f64, y: f64| x - y),
        Op::Mul(a, b) => binary!(a, b, |x: f64, y: f64| x * y),
        Op::Div(a, b) => binary!(a, b, |x: f64, y: f64| x / y),
        Op::Pow(a, b) => binary!(a, b, |x: f64, y: f64| x.powf(y)),
        Op::GammaP(a, b) => binary!(a, b, |x: f64, y: f64| crate::graph::gamma_p(x, y).0),
        Op::Powi(a, 2) => unary!(a, |x: f64| x * x),
        Op::Powi(a, k) => unary!(a, |x: f64| x.powi(k)),
        Op::Neg(a) => unary!(a, |x: f64| -x),
        Op::Exp(a) => unary!(a, crate::vmath::exp),
        Op::Log(a) => unary!(a, crate::vmath::ln),
        Op::Sqrt(a) => unary!(a, f64::sqrt),
        Op::Abs(a) => unary!(a, f64::abs),
        Op::Erf(a) => unary!(a, libm::erf),
        Op::Sin(a) => unary!(a, f64::sin),
        Op::Cos(a) => unary!(a, f64::cos),
        Op::Exprel(a) => unary!(a, crate::graph::exprel),
        Op::Lgamma(a) => unary!(a, libm::lgamma),
        Op::LandauLnPdf(a) => unary!(a, |x: f64| crate::landau::ln_pdf(x).0),
        Op::LandauCdf(a) => unary!(a, crate::landau::cdf),
        Op::LandauSf(a) => unary!(a, crate::landau::sf),
        Op::Hist(a, t) => {
            let t = &tables[t as usize];
            unary!(a, |x: f64| t.at(x))
        }
        Op::Select(c, a, b) => {
            let (c, a, b) = (src(c), src(a), src(b));
            for i in 0..n {
                out[i] = if c.at(i) >= 0.0 { a.at(i) } else { b.at(i) };
            }
        }
        Op::Const(_) | Op::Param(_) => unreachable!("uniform nodes are not evaluated per block"),
    }
}

/// Partial sums a reduction over a block keeps: two AVX2 registers' worth, enough to hide the
/// addition's latency.
const LANES: usize = 8;

/// The partial sums of a reduction combined in one fixed tree.
#[inline(always)]
fn combine(l: &[f64; LANES]) -> f64 {
    ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]))
}

/// Σ x in a fixed order ([`LANES`] interleaved partial sums, then [`combine`]d): the same bits
/// however the caller is scheduled.
#[inline(always)]
pub fn fixed_sum(x: &[f64]) -> f64 {
    let mut lanes = [0.0; LANES];
    let chunks = x.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for k in 0..LANES {
            lanes[k] += c[k];
        }
    }
    for (l, v) in lanes.iter_mut().zip(rest) {
        *l += v;
    }
    combine(&lanes)
}

/// Σ x·w in the order of [`fixed_sum`].
#[inline(always)]
pub fn fixed_dot(x: &[f64], w: &[f64]) -> f64 {
    let mut lanes = [0.0; LANES];
    let whole = x.len() / LANES * LANES;
    for c in 0..x.len() / LANES {
        for k in 0..LANES {
            lanes[k] += x[c * LANES + k] * w[c * LANES + k];
        }
    }
    for (k, l) in lanes.iter_mut().enumerate().take(x.len() - whole) {
        *l += x[whole + k] * w[whole + k];
    }
    combine(&lanes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2 build of a block and the baseline one give the same bits: exp, log, erf,
    /// powers, a select and weights, value and gradient.
    #[test]
    fn wide_and_baseline_blocks_give_the_same_bits() {
        let mut g = Graph::new();
        let x = g.column(0);
        let (m, s, c) = (g.param(0), g.param(1), g.param(2));
        let d = g.sub(x, m);
        let z = g.div(d, s);
        let z2 = g.powi(z, 2);
        let half = g.scale(z2, -0.5);
        let gauss = g.exp(half);
        let e1 = g.erf(z);
        let cx = g.mul(c, x);
        let ex = g.exp(cx);
        let sel = g.select(d, gauss, ex);
        let t = g.add(sel, e1);
        let two = g.constant(2.0);
        let t = g.add(t, two);
        let e = g.log(t);
        let nu = g.param(3);
        let prog = Program::new(&g, e, nu);
        let xs: Vec<f64> = (0..3000).map(|i| (i as f64 * 0.37).sin() * 3.0).collect();
        let ws: Vec<f64> = (0..3000).map(|i| 0.5 + (i % 7) as f64 * 0.1).collect();
        let p = [0.3, 1.7, -0.4, 5.0];
        let run = || {
            let mut grad = vec![0.0; 4];
            let v = prog.eval(&p, &[&xs], Some(&ws), Some(&mut grad));
            (
                v.to_bits(),
                grad.iter().map(|g| g.to_bits()).collect::<Vec<_>>(),
            )
        };
        #[cfg(target_arch = "x86_64")]
        if !wide() {
            eprintln!("this processor has no AVX2 and FMA: only the baseline build runs here");
        }
        let wide = run();
        WIDE.store(false, std::sync::atomic::Ordering::Relaxed);
        let baseline = run();
        WIDE.store(true, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(wide, baseline);
    }

    /// A Gaussian log-density through the program against its formula, value and gradient,
    /// over more events than one block, with and without weights.
    #[test]
    fn value_and_gradient_against_the_formula() {
        let mut g = Graph::new();
        let x = g.column(0);
        let (m, s) = (g.param(0), g.param(1));
        let d = g.sub(x, m);
        let z = g.div(d, s);
        let z2 = g.powi(z, 2);
        let half = g.scale(z2, -0.5);
        let ls = g.log(s);
        let e = g.sub(half, ls);
        let nu = g.param(2);
        let prog = Program::new(&g, e, nu);
        let xs: Vec<f64> = (0..2000).map(|i| (i as f64 * 0.37).sin() * 3.0).collect();
        let ws: Vec<f64> = (0..2000).map(|i| 0.5 + (i % 7) as f64 * 0.1).collect();
        let p = [0.3, 1.7, 5.0];
        for weights in [None, Some(&ws[..])] {
            let w = |i: usize| weights.map_or(1.0, |w| w[i]);
            let mut grad = vec![0.0; 3];
            let v = prog.eval(&p, &[&xs], weights, Some(&mut grad));
            let (mut f, mut gm, mut gs) = (p[2], 0.0, 0.0);
            for (i, &xi) in xs.iter().enumerate() {
                let z = (xi - p[0]) / p[1];
                f -= w(i) * (-0.5 * z * z - p[1].ln());
                gm -= w(i) * z / p[1];
                gs -= w(i) * (z * z / p[1] - 1.0 / p[1]);
            }
            assert!((v - f).abs() < 1e-10 * f.abs(), "{v} {f}");
            assert!((grad[0] - gm).abs() < 1e-9 * gm.abs().max(1.0));
            assert!((grad[1] - gs).abs() < 1e-9 * gs.abs().max(1.0));
            assert_eq!(grad[2], 1.0);
            assert_eq!(prog.eval(&p, &[&xs], weights, None), v);
        }
    }
}
