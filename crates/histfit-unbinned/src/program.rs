//! The CPU evaluator of a [`Graph`]: a term of −ln L of the form
//!
//!   F(θ) = U(θ) − Σ_i w_i · E(x_i; θ)
//!
//! (U: the part that does not depend on the events — an extended likelihood's Σν, constraint
//! terms; E: each event's log-density) with its gradient by reverse-mode differentiation of the
//! graph. Nodes that do not vary with the events are evaluated once per point; the others over
//! blocks of [`BLOCK`] events, each block's forward and backward pass in place.
//!
//! The program is compiled once into two instruction lists — the forward steps of the varying
//! nodes and the backward steps of those an adjoint reaches, each argument's place (a block
//! buffer, a uniform value, an event column read where it lies) and each adjoint's first write
//! resolved ahead — so that a block costs its arithmetic: loops of a fixed length over buffers
//! that stay near the core (the benchmark model's in a 48 kB first-level cache). Two arguments
//! of a backward step take their shares in one loop, and an argument whose share is the
//! adjoint itself takes the node's buffer rather than a copy ([`Bwd`]). The last block is padded with copies of its last event
//! at weight 0. Sums over events (the value, the uniform nodes' adjoints) are kept per lane of
//! a block and reduced in a fixed order per task of [`BLOCKS_PER_TASK`] blocks; tasks run in
//! parallel and are summed in order, so the result has the same bits on one thread or many.

use crate::graph::{eval_scalar, partials, Graph, Id, Op, Table};
use crate::vmath;
use rayon::prelude::*;

/// Events per block. Each loop has a fixed length the compiler turns into vector instructions
/// with no remainder, and a block's buffers (values, adjoints, the uniform arguments broadcast,
/// the lane sums: 1 kB each) stay near the core: the benchmark model's 37 fit a 48 kB
/// first-level cache. 128 measured faster than 64 (each loop's fixed cost spread over twice the
/// events) on every model tried (−16 % on the benchmark model, −4 % on Crystal Ball +
/// exponential, −7 % on the double-sided Crystal Ball, −21 % on a 2-D product), and 256 slower
/// than 128 on the first two (s45, dev-xeon).
pub const BLOCK: usize = 128;

/// Blocks per parallel task (8 192 events).
const BLOCKS_PER_TASK: usize = 64;

/// Events below which an evaluation runs on the calling thread: waking the pool's workers (and
/// their spinning while the optimiser works between evaluations, on a machine of few cores)
/// costs more than the split saves — on 2 cores, a 10k-event fit took 13 ms in parallel and
/// 3.3 ms on one thread.
const PARALLEL_EVENTS: usize = 32_768;

/// One value per event of a block.
type Lanes = [f64; BLOCK];

/// A block of zeros: the argument slot of an operation with fewer arguments.
const ZERO: Lanes = [0.0; BLOCK];

/// Where a node's values over a block are.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Place {
    /// The same for every event: evaluated once per point.
    Uniform,
    /// Computed per block into buffer slot `s`.
    Buf(u32),
    /// An event column, read where it lies: entry `p` of [`Program::columns`].
    Col(u32),
}

/// An argument of a varying node: a block buffer, an event column, or a uniform node's index
/// among the boundary nodes (its value, its broadcast buffer, its adjoint's lane sums).
#[derive(Debug, Clone, Copy)]
enum Arg {
    Buf(u32),
    Col(u32),
    Uni(u32),
}

/// Where a backward step adds an argument's share of the adjoint: an index into a block's
/// adjoint store (the varying nodes' adjoint buffers, then each boundary node's lane sums).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Take {
    /// The argument takes none (no parameter moves it, or its adjoint is the node's own
    /// buffer, handed on: see [`Bwd::adj`]).
    No,
    /// Store entry `s`, written here first in every block (assigned, not added: no buffer is
    /// zeroed).
    First(u32),
    /// Store entry `s`, added to.
    Add(u32),
}

impl Take {
    /// The store entry written, if any, and whether it is assigned rather than added to.
    fn target(self) -> Option<(usize, bool)> {
        match self {
            Take::No => None,
            Take::First(s) => Some((s as usize, true)),
            Take::Add(s) => Some((s as usize, false)),
        }
    }
}

/// [`Bwd::adj`] of the event term: its adjoint is the block's weights (1 where none), read
/// where they lie.
const SEED: u32 = u32::MAX;

/// Every weight 1: the event term's adjoint where the events have no weights.
const ONES: Lanes = [1.0; BLOCK];

/// Whether argument `m`'s share of an adjoint is the adjoint itself (its partial is 1).
fn unit_share(op: Op, m: usize) -> bool {
    matches!(
        (op, m),
        (Op::Add(..), _) | (Op::Sub(..), 0) | (Op::Fma(..), 2)
    )
}

/// A forward step: the operation, its buffer slot, its arguments, and the select arm it
/// serves alone, if any (see [`Guard`]).
#[derive(Debug, Clone, Copy)]
struct Fwd {
    op: Op,
    out: u32,
    n_args: u32,
    args: [Arg; 3],
    guard: Option<Guard>,
}

/// A step whose value only arm `arm` (1: taken where the condition is ≥ 0, 2: elsewhere) of
/// select [`Program::selects`]`[select]` reads, directly or through other such steps: a block
/// whose events all take the other arm skips it, forward and backward. A Crystal Ball's tail
/// (a ln and its terms) then costs nothing in a block of core events — where the events are
/// grouped by the observable ([`Program::grouping_column`]), nearly every block.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Guard {
    select: u32,
    arm: u8,
}

/// A select whose arms have [`Guard`]ed steps: its condition, and its own guard (a select
/// skipped with an arm of another skips both of its own arms).
#[derive(Debug, Clone, Copy)]
struct Select {
    cond: Arg,
    guard: Option<Guard>,
}

/// What a block's events need of a select's arms ([`Scratch::need`]): not decided yet, or a set
/// of skipped arms (bit 1: arm 1, bit 2: arm 2; [`NEED_BOTH`] none skipped).
const NEED_UNKNOWN: u8 = 0;
const NEED_BOTH: u8 = 4;
/// Both arms skipped: the select itself is.
const NEED_NEITHER: u8 = 3;

impl Fwd {
    /// Whether buffer `s` is one argument of the step, not several.
    fn reads_once(&self, s: u32) -> bool {
        let args = &self.args[..self.n_args as usize];
        args.iter()
            .filter(|a| matches!(a, Arg::Buf(t) if *t == s))
            .count()
            == 1
    }
}

/// A backward step of a node an adjoint reaches: the operation, its buffer slot (values), the
/// store entry holding its adjoint, its arguments and where each takes its share.
///
/// An argument whose share is the adjoint itself (a sum's terms, a difference's first, a
/// multiply-add's addend) and is written here first takes the node's store entry as its own
/// instead of a copy: the node's adjoint is not read after its step. At most one argument of a
/// step does, so that every entry holds one live adjoint.
#[derive(Debug, Clone, Copy)]
struct Bwd {
    op: Op,
    slot: u32,
    adj: u32,
    n_args: u32,
    args: [Arg; 3],
    take: [Take; 3],
    guard: Option<Guard>,
    /// Where the step is skipped, the store entries it writes first that steps not skipped
    /// with it go on to add to: zeroed instead ([`Program::zero_on_skip`]`[a..b]`).
    zero_on_skip: (u32, u32),
}

/// The compiled term U − Σ w E over one set of event columns.
#[derive(Debug, Clone)]
pub struct Program {
    ops: Vec<Op>,
    /// The graph's tables ([`Op::Hist`]).
    tables: Vec<Table>,
    /// Needed nodes that do not depend on the events, in order.
    uniform: Vec<u32>,
    /// Each node's place.
    place: Vec<Place>,
    /// Buffer slots in use.
    slots: usize,
    /// Uniform nodes read by varying ones.
    boundary: Vec<u32>,
    /// In an order of the graph where each select's guarded steps come just before it.
    fwd: Vec<Fwd>,
    /// In reverse order of `fwd`.
    bwd: Vec<Bwd>,
    /// The selects with guarded steps.
    selects: Vec<Select>,
    zero_on_skip: Vec<u32>,
    /// The graph column whose order decides the guarded selects' conditions, if any: the
    /// events grouped by it make whole blocks skip an arm.
    pub grouping_column: Option<usize>,
    event: Id,
    uniform_term: Id,
    /// Graph columns the program reads.
    pub columns: Vec<usize>,
}

/// A block's argument: a buffer or a scalar.
#[derive(Clone, Copy)]
enum Src<'a> {
    V(&'a Lanes),
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

/// The widest build blocks may use (tests lower it to compare bits): 2 AVX-512, 1 AVX2, 0 the
/// baseline.
static WIDEST: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(2);

/// The instruction sets a block's loops are compiled for, chosen once per block by what the
/// processor has. Every build does the same operations in the same order (each `mul_add` one
/// fused instruction or one correctly rounded call), so all give the same bits; a wider one
/// does more events an instruction — 8 doubles where AVX-512 is, 4 with AVX2.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Width {
    Baseline,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

/// The widest build the environment allows: `HISTFIT_SIMD=baseline|avx2` caps it (any other
/// value, or none, allows the widest), for measuring one build against another on one machine.
/// Only the event-level blocks read it.
fn simd_limit() -> u8 {
    static LIMIT: std::sync::OnceLock<u8> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| match std::env::var("HISTFIT_SIMD").as_deref() {
        Ok("baseline") => 0,
        Ok("avx2") => 1,
        _ => 2,
    })
}

/// The widest build allowed that the processor runs.
#[inline(always)]
fn width() -> Width {
    #[cfg(target_arch = "x86_64")]
    {
        let allowed = WIDEST
            .load(std::sync::atomic::Ordering::Relaxed)
            .min(simd_limit());
        let avx2 = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
        if allowed >= 2
            && avx2
            && std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512dq")
        {
            return Width::Avx512;
        }
        if allowed >= 1 && avx2 {
            return Width::Avx2;
        }
    }
    Width::Baseline
}

impl Program {
    /// The program of U − Σ w E for the event term `event` and the uniform term `uniform`.
    pub fn new(graph: &Graph, event: Id, uniform: Id) -> Program {
        let (lowered, out) = graph.lowered(&[event, uniform]);
        let (graph, event, uniform) = (&lowered, out[0], out[1]);
        let need = graph.reachable(&[event, uniform]);
        let ops = graph.ops().to_vec();
        let tables = graph.tables().to_vec();
        let mut place = vec![Place::Uniform; ops.len()];
        let (mut uni, mut var) = (Vec::new(), Vec::new());
        let mut columns = Vec::new();
        for (i, &needed) in need.iter().enumerate() {
            if !needed {
                continue;
            }
            if !graph.varying(Id(i as u32)) {
                uni.push(i as u32);
            } else if let Op::Column(j) = ops[i] {
                columns.push(j);
            } else {
                var.push(i as u32);
            }
        }
        columns.sort_unstable();
        columns.dedup();
        for (i, op) in ops.iter().enumerate() {
            if let (true, Op::Column(j)) = (need[i], op) {
                place[i] = Place::Col(columns.binary_search(j).unwrap() as u32);
            }
        }
        for (s, &v) in var.iter().enumerate() {
            place[v as usize] = Place::Buf(s as u32);
        }
        let mut boundary_index = vec![u32::MAX; ops.len()];
        let mut boundary = Vec::new();
        let mut arg_of = |a: Id| -> Arg {
            let a = a.0 as usize;
            match place[a] {
                Place::Buf(s) => Arg::Buf(s),
                Place::Col(p) => Arg::Col(p),
                Place::Uniform => {
                    if boundary_index[a] == u32::MAX {
                        boundary_index[a] = boundary.len() as u32;
                        boundary.push(a as u32);
                    }
                    Arg::Uni(boundary_index[a])
                }
            }
        };
        let (order, slot_guard, select_slots) = guarded_order(&ops, &place, &var, event);
        let select_index = |slot: usize| select_slots.binary_search(&(slot as u32)).ok();
        let slot_guard: Vec<Option<Guard>> = slot_guard
            .iter()
            .map(|g| {
                g.map(|(sel, arm)| Guard {
                    select: select_index(sel as usize).expect("a guarded select") as u32,
                    arm,
                })
            })
            .collect();
        let fwd: Vec<Fwd> = order
            .iter()
            .map(|&s| {
                let op = ops[var[s] as usize];
                let mut args = [Arg::Buf(0); 3];
                for (m, a) in op.args().enumerate() {
                    args[m] = arg_of(a);
                }
                Fwd {
                    op,
                    out: s as u32,
                    n_args: op.args().count() as u32,
                    args,
                    guard: slot_guard[s],
                }
            })
            .collect();
        let selects: Vec<Select> = select_slots
            .iter()
            .map(|&sel| {
                let cond = ops[var[sel as usize] as usize]
                    .args()
                    .next()
                    .expect("a condition");
                Select {
                    cond: arg_of(cond),
                    guard: slot_guard[sel as usize],
                }
            })
            .collect();
        let grouping_column = select_slots.first().and_then(|&sel| {
            let cond = ops[var[sel as usize] as usize].args().next()?;
            first_column(&ops, cond)
        });
        // A node no parameter moves (a column, a constant, a function of them) takes no
        // adjoint.
        let mut moves = vec![false; ops.len()];
        for (i, op) in ops.iter().enumerate() {
            moves[i] = match op {
                Op::Param(_) => true,
                // A histogram's value is piecewise constant: no derivative passes through it
                // (its backward step writes nothing, so it must not take an adjoint's first
                // write from the argument's other readers).
                Op::Const(_) | Op::Column(_) | Op::Hist(..) => false,
                op => op.args().any(|a| moves[a.0 as usize]),
            };
        }
        // The backward steps, which contribution writes each adjoint first and which store
        // entry holds it: the same in every block, so decided here. Boundary node b's lane sums
        // are store entry `slots + b`.
        let slots = var.len() as u32;
        let mut entry: Vec<Option<u32>> = vec![None; var.len()];
        if let Place::Buf(s) = place[event.0 as usize] {
            entry[s as usize] = Some(SEED);
        }
        let mut bwd = Vec::new();
        let mut zero_on_skip = Vec::new();
        for f in fwd.iter().rev() {
            let v = var[f.out as usize] as usize;
            let Some(adj) = entry[f.out as usize].filter(|_| moves[v]) else {
                continue;
            };
            let mut take = [Take::No; 3];
            // The seed is not the store's to hand on.
            let mut handed = adj == SEED;
            for (m, a) in f.op.args().enumerate() {
                // A select's condition gets no derivative.
                if !moves[a.0 as usize] || (matches!(f.op, Op::Select(..)) && m == 0) {
                    continue;
                }
                take[m] = match f.args[m] {
                    Arg::Buf(s) => match entry[s as usize] {
                        Some(e) => Take::Add(e),
                        // Handed on only within the step's guard: the two are then skipped
                        // together, and the entry read by nothing while they are.
                        None if !handed
                            && unit_share(f.op, m)
                            && f.reads_once(s)
                            && (f.guard.is_none() || slot_guard[s as usize] == f.guard) =>
                        {
                            handed = true;
                            entry[s as usize] = Some(adj);
                            Take::No
                        }
                        None => {
                            entry[s as usize] = Some(s);
                            Take::First(s)
                        }
                    },
                    Arg::Uni(b) => Take::Add(slots + b),
                    Arg::Col(_) => Take::No,
                };
            }
            // Entries this step writes first that steps running without it add to: zeroed
            // where it is skipped. Not those of arguments skipped with it (its own guard's
            // steps, a skipped select's arms).
            let from = zero_on_skip.len() as u32;
            if let Some(g) = f.guard {
                let own = select_index(f.out as usize);
                for (m, t) in take.iter().enumerate() {
                    if let Take::First(e) = *t {
                        let with = slot_guard[e as usize];
                        let arm_of_self = own.is_some_and(|k| {
                            with == Some(Guard {
                                select: k as u32,
                                arm: m as u8,
                            })
                        });
                        if with != Some(g) && !arm_of_self {
                            zero_on_skip.push(e);
                        }
                    }
                }
            }
            bwd.push(Bwd {
                op: f.op,
                slot: f.out,
                adj,
                n_args: f.n_args,
                args: f.args,
                take,
                guard: f.guard,
                zero_on_skip: (from, zero_on_skip.len() as u32),
            });
        }
        Program {
            ops,
            tables,
            uniform: uni,
            place,
            slots: var.len(),
            boundary,
            fwd,
            bwd,
            selects,
            zero_on_skip,
            grouping_column,
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
        self.fwd
            .iter()
            .filter_map(|f| match f.op {
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

    /// Whether the event term depends on the events.
    fn event_varies(&self) -> bool {
        self.place[self.event.0 as usize] != Place::Uniform
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
        let sum_w = || match weights {
            Some(w) => fixed_sum(w),
            None => n as f64,
        };
        let (sum_we, boundary_adj) = if self.event_varies() {
            self.blocks(&uni, columns, weights, n, want_grad)
        } else {
            // An event term that does not depend on the events: E · Σ w.
            (uni[self.event.0 as usize] * sum_w(), Vec::new())
        };
        let value = uni[self.uniform_term.0 as usize] - sum_we;
        if let Some(grad) = grad {
            let mut adj = vec![0.0; self.ops.len()];
            adj[self.uniform_term.0 as usize] += 1.0;
            if !self.event_varies() {
                adj[self.event.0 as usize] -= sum_w();
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
                        let d = partials(op, uni[i], &|x| uni[x.0 as usize], &self.tables);
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

    /// Every block of `n` events in turn: `f(scratch, block)`, the last one padded.
    fn each_block(
        &self,
        uni: &[f64],
        columns: &[&[f64]],
        n: usize,
        s: &mut Scratch,
        mut f: impl FnMut(&mut Scratch, Block<'_>, usize),
    ) {
        let bvals = self.boundary_values(uni);
        for b in 0..n.div_ceil(BLOCK) {
            let start = b * BLOCK;
            let len = BLOCK.min(n - start);
            self.with_block(&bvals, columns, None, start, len, |at| f(s, at, len));
        }
    }

    /// E(x_i; θ) for every event (forward only): densities for plots, per-event checks.
    pub fn event_values(&self, params: &[f64], columns: &[&[f64]]) -> Vec<f64> {
        let uni = self.uniform_values(params);
        let n = self.event_count(columns);
        if !self.event_varies() {
            return vec![uni[self.event.0 as usize]; n];
        }
        let mut out = Vec::with_capacity(n);
        let mut s = self.scratch(&uni, false);
        self.each_block(&uni, columns, n, &mut s, |s, at, len| {
            self.forward_any(at, s);
            let e = self.lanes(self.event, at, &s.vals, &uni);
            out.extend((0..len).map(|i| e.at(i)));
        });
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
        let mut s = self.scratch(&uni, false);
        let mut tangent = vec![ZERO; self.slots];
        for &j in which {
            // Tangents of the uniform nodes (scalars).
            let mut ut = vec![0.0; self.ops.len()];
            for &i in &self.uniform {
                let i = i as usize;
                ut[i] = match self.ops[i] {
                    Op::Param(p) => f64::from(p == j),
                    op => {
                        let d = partials(op, uni[i], &|x| uni[x.0 as usize], &self.tables);
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
            if !self.event_varies() {
                out.push(vec![ut[e]; n]);
                continue;
            }
            self.each_block(&uni, columns, n, &mut s, |s, at, len| {
                self.forward_any(at, s);
                let value_of = |a: Id, t: usize| self.lanes(a, at, &s.vals, &uni).at(t);
                let tangent_of = |a: Id, t: usize, tangent: &[Lanes]| match self.place[a.0 as usize]
                {
                    Place::Uniform => ut[a.0 as usize],
                    Place::Buf(k) => tangent[k as usize][t],
                    Place::Col(_) => 0.0,
                };
                for f in &self.fwd {
                    // A step the block skipped has no values; nothing taken reads its tangent
                    // (its select's partial there is 0), which is set to 0 rather than made of
                    // stale values.
                    if f.guard
                        .is_some_and(|g| s.need[g.select as usize] & g.arm != 0)
                    {
                        tangent[f.out as usize] = ZERO;
                        continue;
                    }
                    let v = &s.vals[f.out as usize];
                    for t in 0..len {
                        let d = partials(f.op, v[t], &|x| value_of(x, t), &self.tables);
                        let dt =
                            f.op.args()
                                .enumerate()
                                .filter(|(pos, _)| d[*pos] != 0.0)
                                .map(|(pos, a)| d[pos] * tangent_of(a, t, &tangent))
                                .sum();
                        tangent[f.out as usize][t] = dt;
                    }
                }
                col.extend((0..len).map(|t| tangent_of(self.event, t, &tangent)));
            });
            out.push(col);
        }
        out
    }

    /// Node `a`'s values over a block (a varying node's buffer, a column) or its uniform value
    /// (from `uni`, the uniform nodes' values).
    fn lanes<'a>(&self, a: Id, at: Block<'a>, vals: &'a [Lanes], uni: &[f64]) -> Src<'a> {
        match self.place[a.0 as usize] {
            Place::Buf(s) => Src::V(&vals[s as usize]),
            Place::Col(p) => Src::V(at.column(p)),
            Place::Uniform => Src::S(uni[a.0 as usize]),
        }
    }

    /// The boundary nodes' values at this point.
    fn boundary_values(&self, uni: &[f64]) -> Vec<f64> {
        self.boundary.iter().map(|&b| uni[b as usize]).collect()
    }

    /// A block's buffers, the boundary values broadcast for a backward pass.
    fn scratch(&self, uni: &[f64], grad: bool) -> Scratch {
        let nb = self.boundary.len();
        Scratch {
            vals: vec![ZERO; self.slots],
            adj: vec![ZERO; if grad { self.slots + nb } else { 0 }],
            ubuf: if grad {
                self.boundary
                    .iter()
                    .map(|&b| [uni[b as usize]; BLOCK])
                    .collect()
            } else {
                Vec::new()
            },
            eacc: ZERO,
            need: vec![NEED_UNKNOWN; self.selects.len()],
        }
    }

    /// The block of `len` events from `start`, handed to `f`: a full block reads the columns
    /// where they lie; a short last block is copied, filled up with its last event at weight 0.
    #[allow(clippy::too_many_arguments)]
    fn with_block<R>(
        &self,
        bvals: &[f64],
        columns: &[&[f64]],
        weights: Option<&[f64]>,
        start: usize,
        len: usize,
        f: impl FnOnce(Block<'_>) -> R,
    ) -> R {
        let full = Block {
            bvals,
            columns,
            graph_columns: &self.columns,
            start,
            weights: None,
            padded: None,
        };
        if len == BLOCK {
            return f(Block {
                weights: weights.map(|w| lanes_at(w, start)),
                ..full
            });
        }
        let mut pad = vec![ZERO; self.columns.len()];
        for (p, &j) in self.columns.iter().enumerate() {
            let src = &columns[j][start..start + len];
            pad[p][..len].copy_from_slice(src);
            pad[p][len..].fill(src[len - 1]);
        }
        let mut w = ZERO;
        match weights {
            Some(ws) => w[..len].copy_from_slice(&ws[start..start + len]),
            None => w[..len].fill(1.0),
        }
        f(Block {
            start: 0,
            weights: Some(&w),
            padded: Some(&pad),
            ..full
        })
    }

    fn event_count(&self, columns: &[&[f64]]) -> usize {
        self.columns.first().map_or(0, |&j| columns[j].len())
    }

    /// Σ_i w_i E_i over every block, and (with `grad`) its derivative in each boundary node;
    /// per task of blocks in parallel, combined in task order.
    fn blocks(
        &self,
        uni: &[f64],
        columns: &[&[f64]],
        weights: Option<&[f64]>,
        n: usize,
        grad: bool,
    ) -> (f64, Vec<f64>) {
        let n_blocks = n.div_ceil(BLOCK);
        let bvals = self.boundary_values(uni);
        // A task's blocks into one scratch (made once per worker's run of tasks), their sums
        // kept per lane and reduced at the task's end.
        let task = |s: &mut Scratch, t: usize| -> (f64, Vec<f64>) {
            s.eacc = ZERO;
            for b in s.adj.iter_mut().skip(self.slots).take(self.boundary.len()) {
                *b = ZERO;
            }
            let lo = t * BLOCKS_PER_TASK;
            let hi = ((t + 1) * BLOCKS_PER_TASK).min(n_blocks);
            for b in lo..hi {
                let start = b * BLOCK;
                let len = BLOCK.min(n - start);
                self.with_block(&bvals, columns, weights, start, len, |at| {
                    self.block(at, s, grad)
                });
            }
            (
                fixed_sum(&s.eacc),
                s.adj
                    .iter()
                    .skip(self.slots)
                    .take(self.boundary.len())
                    .map(|b| fixed_sum(b))
                    .collect(),
            )
        };
        let n_tasks = n_blocks.div_ceil(BLOCKS_PER_TASK);
        let parts: Vec<(f64, Vec<f64>)> = if n_tasks > 1 && n >= PARALLEL_EVENTS {
            (0..n_tasks)
                .into_par_iter()
                .map_init(|| self.scratch(uni, grad), task)
                .collect()
        } else {
            let mut s = self.scratch(uni, grad);
            (0..n_tasks).map(|t| task(&mut s, t)).collect()
        };
        let mut total = 0.0;
        let mut adj = vec![0.0; self.boundary.len()];
        for (v, b) in &parts {
            total += v;
            for (a, x) in adj.iter_mut().zip(b) {
                *a += x;
            }
        }
        (total, adj)
    }

    /// One block (see [`block_body`](Self::block_body)), with AVX-512's eight-lane or AVX2's
    /// four-lane instructions and fused multiply-adds where the processor has them (see
    /// [`Width`]): the same operations in the same order, so the same bits (Rust contracts no multiply-add into an FMA by itself, and the
    /// ones written as `mul_add` round once either way), only wider.
    fn block(&self, at: Block<'_>, s: &mut Scratch, grad: bool) {
        match width() {
            // SAFETY: `width` chose these builds because the processor has their instructions.
            #[cfg(target_arch = "x86_64")]
            Width::Avx512 => unsafe { self.block_avx512(at, s, grad) },
            #[cfg(target_arch = "x86_64")]
            Width::Avx2 => unsafe { self.block_avx2(at, s, grad) },
            Width::Baseline => self.block_body(at, s, grad),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn block_avx2(&self, at: Block<'_>, s: &mut Scratch, grad: bool) {
        self.block_body(at, s, grad)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
    unsafe fn block_avx512(&self, at: Block<'_>, s: &mut Scratch, grad: bool) {
        self.block_body(at, s, grad)
    }

    /// [`forward`](Self::forward) in the wide build where the processor has it (for the
    /// callers outside a fit's evaluation: densities, per-event scores).
    fn forward_any(&self, at: Block<'_>, s: &mut Scratch) {
        match width() {
            // SAFETY: `width` chose these builds because the processor has their instructions.
            #[cfg(target_arch = "x86_64")]
            Width::Avx512 => unsafe { self.forward_avx512(at, s) },
            #[cfg(target_arch = "x86_64")]
            Width::Avx2 => unsafe { self.forward_avx2(at, s) },
            Width::Baseline => self.forward(at, s),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512dq,avx2,fma")]
    unsafe fn forward_avx512(&self, at: Block<'_>, s: &mut Scratch) {
        self.forward(at, s)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn forward_avx2(&self, at: Block<'_>, s: &mut Scratch) {
        self.forward(at, s)
    }

    /// The forward steps of one block into the scratch buffers.
    #[inline(always)]
    fn forward(&self, at: Block<'_>, s: &mut Scratch) {
        // (A call of `memset` per block even where there is nothing to fill: 15 % of a model
        // without selects.)
        if !self.selects.is_empty() {
            s.need.fill(NEED_UNKNOWN);
        }
        for f in &self.fwd {
            if f.guard.is_some_and(|g| self.skips(g, at, s)) {
                #[cfg(test)]
                tests::SKIPPED.with(|n| n.set(n.get() + 1));
                continue;
            }
            let (before, rest) = s.vals.split_at_mut(f.out as usize);
            let mut x = [Src::S(0.0); 3];
            for (m, arg) in f.args.iter().enumerate().take(f.n_args as usize) {
                x[m] = match *arg {
                    Arg::Buf(j) => Src::V(&before[j as usize]),
                    Arg::Col(p) => Src::V(at.column(p)),
                    Arg::Uni(b) => Src::S(at.bvals[b as usize]),
                };
            }
            forward(f.op, x, &self.tables, &mut rest[0]);
        }
    }

    /// Whether this block skips the steps of guard `g`: every event takes the select's other
    /// arm, or the select itself is skipped.
    #[inline(always)]
    fn skips(&self, g: Guard, at: Block<'_>, s: &mut Scratch) -> bool {
        self.need(g.select as usize, at, s) & g.arm != 0
    }

    /// Which arms of select `k` this block skips (decided once per block, from its condition's
    /// values, which come before its arms' steps). The selects of `k`'s chain of guards are
    /// decided outermost first, by a loop rather than through [`Self::skips`]: a call cycle
    /// would keep one of the two out of line, and this count (inlined into the wide builds of
    /// the block, where it vectorises) would run in the baseline's two lanes — 3 % of a 1M
    /// Crystal Ball fit when it was called apart.
    #[inline(always)]
    fn need(&self, k: usize, at: Block<'_>, s: &mut Scratch) -> u8 {
        while s.need[k] == NEED_UNKNOWN {
            // The outermost select of the chain not decided yet (its own guard's select is).
            let mut u = k;
            while let Some(g) = self.selects[u].guard {
                if s.need[g.select as usize] != NEED_UNKNOWN {
                    break;
                }
                u = g.select as usize;
            }
            s.need[u] = self.decide(u, at, s);
        }
        s.need[k]
    }

    /// [`Self::need`] of select `k`, its guard's select decided.
    #[inline(always)]
    fn decide(&self, k: usize, at: Block<'_>, s: &Scratch) -> u8 {
        let sel = self.selects[k];
        if sel
            .guard
            .is_some_and(|g| s.need[g.select as usize] & g.arm != 0)
        {
            return NEED_NEITHER;
        }
        let c = match sel.cond {
            Arg::Buf(j) => Src::V(&s.vals[j as usize]),
            Arg::Col(p) => Src::V(at.column(p)),
            Arg::Uni(b) => Src::S(at.bvals[b as usize]),
        };
        let (any, all) = match c {
            Src::V(v) => {
                let taking_first: usize = v.iter().map(|&x| usize::from(x >= 0.0)).sum();
                (taking_first > 0, taking_first == v.len())
            }
            Src::S(x) => (x >= 0.0, x >= 0.0),
        };
        match (any, all) {
            // Every event takes arm 1: arm 2 skipped.
            (_, true) => 2,
            (false, _) => 1,
            _ => NEED_BOTH,
        }
    }

    /// One block: forward, the lane sums of w E, and the backward pass into the adjoints'
    /// lane sums.
    #[inline(always)]
    fn block_body(&self, at: Block<'_>, s: &mut Scratch, grad: bool) {
        self.forward(at, s);
        let Scratch {
            vals,
            adj,
            ubuf,
            eacc,
            need,
        } = s;
        let e = match self.place[self.event.0 as usize] {
            Place::Buf(s) => &vals[s as usize],
            Place::Col(p) => at.column(p),
            Place::Uniform => unreachable!("blocks run only where the event term varies"),
        };
        match at.weights {
            // An event at weight 0 (a padding copy) adds nothing, even where its E is not
            // finite.
            Some(w) => {
                for i in 0..BLOCK {
                    eacc[i] += if w[i] != 0.0 { w[i] * e[i] } else { 0.0 };
                }
            }
            None => {
                for i in 0..BLOCK {
                    eacc[i] += e[i];
                }
            }
        }
        if !grad {
            return;
        }
        if !matches!(self.place[self.event.0 as usize], Place::Buf(_)) {
            // An event term that is a column: no parameter moves it.
            return;
        }
        let seed = at.weights.unwrap_or(&ONES);
        for step in &self.bwd {
            if let Some(g) = step.guard {
                if need[g.select as usize] & g.arm != 0 {
                    let (a, b) = step.zero_on_skip;
                    for &e in &self.zero_on_skip[a as usize..b as usize] {
                        adj[e as usize] = ZERO;
                    }
                    continue;
                }
            }
            let mut x = [&ZERO; 3];
            for (m, arg) in step.args.iter().enumerate().take(step.n_args as usize) {
                x[m] = match *arg {
                    Arg::Buf(j) => &vals[j as usize],
                    Arg::Col(p) => at.column(p),
                    Arg::Uni(b) => &ubuf[b as usize],
                };
            }
            backward(step, &vals[step.slot as usize], x, adj, seed, &self.tables);
        }
    }
}

/// The varying nodes' execution order (slots, which are their indices in `var`), each slot's
/// guard as (the select's slot, its arm), and the slots of the selects that guard any step.
///
/// A node is guarded by arm m of select S where every reader of its value is S through that
/// arm alone or a node guarded by the same arm (the nearest such select: a node of an inner
/// select's arm is guarded by the inner one). Each select's guarded nodes are then moved to
/// just before it, in their own order — after its condition, which a block's decision reads;
/// every node still after its arguments (a guarded node's readers are in its group or the
/// select itself, which come after it).
type GuardedOrder = (Vec<usize>, Vec<Option<(u32, u8)>>, Vec<u32>);

fn guarded_order(ops: &[Op], place: &[Place], var: &[u32], event: Id) -> GuardedOrder {
    let n = var.len();
    let slot = |a: Id| match place[a.0 as usize] {
        Place::Buf(s) => Some(s as usize),
        _ => None,
    };
    let mut readers: Vec<Vec<(usize, usize)>> = vec![Vec::new(); n];
    for (u, &node) in var.iter().enumerate() {
        for (m, a) in ops[node as usize].args().enumerate() {
            if let Some(s) = slot(a) {
                readers[s].push((u, m));
            }
        }
    }
    let event_slot = slot(event);
    let mut guard: Vec<Option<(u32, u8)>> = vec![None; n];
    for v in (0..n).rev() {
        if Some(v) == event_slot || readers[v].is_empty() {
            continue;
        }
        let mut common: Option<Option<(u32, u8)>> = None;
        for &(u, m) in &readers[v] {
            let g = match ops[var[u] as usize] {
                Op::Select(..) if m > 0 => Some((u as u32, m as u8)),
                _ => guard[u],
            };
            common = match common {
                Some(c) if c != g => Some(None),
                _ => Some(g),
            };
        }
        guard[v] = common.flatten();
    }
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (v, g) in guard.iter().enumerate() {
        if let Some((sel, _)) = g {
            groups[*sel as usize].push(v);
        }
    }
    let select_slots: Vec<u32> = (0..n)
        .filter(|&v| !groups[v].is_empty())
        .map(|v| v as u32)
        .collect();
    fn emit(v: usize, groups: &[Vec<usize>], order: &mut Vec<usize>) {
        for &g in &groups[v] {
            emit(g, groups, order);
        }
        order.push(v);
    }
    let mut order = Vec::with_capacity(n);
    for v in 0..n {
        if guard[v].is_none() {
            emit(v, &groups, &mut order);
        }
    }
    // Every node once, after its arguments.
    let mut done = vec![false; n];
    for &v in &order {
        assert!(
            !done[v]
                && ops[var[v] as usize]
                    .args()
                    .all(|a| slot(a).is_none_or(|s| done[s])),
            "a guarded order out of dependency order"
        );
        done[v] = true;
    }
    assert_eq!(order.len(), n, "every node ordered once");
    (order, guard, select_slots)
}

/// The first event column node `a` depends on (through its arguments), if any.
fn first_column(ops: &[Op], a: Id) -> Option<usize> {
    let mut stack = vec![a];
    let mut seen = std::collections::HashSet::new();
    let mut found: Option<usize> = None;
    while let Some(x) = stack.pop() {
        if !seen.insert(x.0) {
            continue;
        }
        match ops[x.0 as usize] {
            Op::Column(j) => found = Some(found.map_or(j, |f| f.min(j))),
            op => stack.extend(op.args()),
        }
    }
    found
}

/// Entries `start..start + BLOCK` of `v` as a block.
#[inline(always)]
fn lanes_at(v: &[f64], start: usize) -> &Lanes {
    v[start..start + BLOCK].try_into().unwrap()
}

/// A node's adjoint (store entry `at`, or the seed) and one argument's entry `t` (other than
/// the node's, as [`Program::new`] assigns them).
#[inline(always)]
fn entry1<'s>(
    store: &'s mut [Lanes],
    seed: &'s Lanes,
    at: u32,
    t: usize,
) -> (&'s Lanes, &'s mut Lanes) {
    if at == SEED {
        return (seed, &mut store[t]);
    }
    let [a, t] = store
        .get_disjoint_mut([at as usize, t])
        .expect("an argument's entry is not the node's");
    (a, t)
}

/// [`entry1`] for two arguments' entries (distinct).
#[inline(always)]
fn entry2<'s>(
    store: &'s mut [Lanes],
    seed: &'s Lanes,
    at: u32,
    t: [usize; 2],
) -> (&'s Lanes, [&'s mut Lanes; 2]) {
    if at == SEED {
        return (seed, store.get_disjoint_mut(t).expect("distinct entries"));
    }
    let [a, p, q] = store
        .get_disjoint_mut([at as usize, t[0], t[1]])
        .expect("arguments' entries are not the node's");
    (a, [p, q])
}

/// `t_m[i] += a[i] · d(i)[m]` for every event of a block (nothing where `a[i]` is 0). A
/// function of its own so that its distinct buffers are known not to overlap where it is
/// inlined: the loop then vectorises without run-time checks, which it does not in place.
#[inline(always)]
fn add_shares3(
    a: &Lanes,
    p: &mut Lanes,
    q: &mut Lanes,
    r: &mut Lanes,
    d: impl Fn(usize) -> [f64; 3],
) {
    for i in 0..BLOCK {
        let [d0, d1, d2] = d(i).map(|d| a[i] * d);
        let keep = a[i] != 0.0;
        let (d0, d1, d2) = if keep { (d0, d1, d2) } else { (0.0, 0.0, 0.0) };
        p[i] += d0;
        q[i] += d1;
        r[i] += d2;
    }
}

/// [`entry1`] for three arguments' entries (distinct).
#[inline(always)]
fn entry3<'s>(
    store: &'s mut [Lanes],
    seed: &'s Lanes,
    at: u32,
    t: [usize; 3],
) -> (&'s Lanes, [&'s mut Lanes; 3]) {
    if at == SEED {
        return (seed, store.get_disjoint_mut(t).expect("distinct entries"));
    }
    let [a, p, q, r] = store
        .get_disjoint_mut([at as usize, t[0], t[1], t[2]])
        .expect("arguments' entries are not the node's");
    (a, [p, q, r])
}

/// The backward step of one varying node over a block: the node's adjoint `a` (store entry
/// [`Bwd::adj`]; value `v`) times each partial derivative, assigned or added into each
/// argument's store entry — two arguments' shares in one loop over the block where their
/// entries differ (a sum's, a product's, a quotient's, a multiply-add's two that take one),
/// so that the adjoint and the values are read once. An event whose adjoint is
/// 0 here (a branch a Select did not take, a padding copy) adds nothing, even where that
/// branch's derivative is not finite: the partial is computed for every event and discarded by
/// a select, which vectorises where a branch would not.
// The partials are written as they are: −1 times the adjoint reads as the rule it is.
#[allow(clippy::neg_multiply)]
#[inline(always)]
fn backward(
    step: &Bwd,
    v: &Lanes,
    x: [&Lanes; 3],
    store: &mut [Lanes],
    seed: &Lanes,
    tables: &[Table],
) {
    let [x0, x1, x2] = x;
    // One argument's share.
    macro_rules! acc {
        ($m:expr, |$i:ident| $d:expr) => {{
            if let Some((t, first)) = step.take[$m].target() {
                let (a, t) = entry1(store, seed, step.adj, t);
                if first {
                    for $i in 0..BLOCK {
                        let d = a[$i] * ($d);
                        t[$i] = if a[$i] != 0.0 { d } else { 0.0 };
                    }
                } else {
                    for $i in 0..BLOCK {
                        let d = a[$i] * ($d);
                        t[$i] += if a[$i] != 0.0 { d } else { 0.0 };
                    }
                }
            }
        }};
    }
    // The shares of arguments m0 and m1 in one loop, where both take one in different entries.
    macro_rules! acc2 {
        ($m0:expr, $m1:expr, |$i:ident| $d0:expr, |$j:ident| $d1:expr) => {{
            match (step.take[$m0].target(), step.take[$m1].target()) {
                (Some((t0, f0)), Some((t1, f1))) if t0 != t1 => {
                    let (a, [p, q]) = entry2(store, seed, step.adj, [t0, t1]);
                    macro_rules! pass {
                        ($first0:expr, $first1:expr) => {
                            for $i in 0..BLOCK {
                                let $j = $i;
                                let keep = a[$i] != 0.0;
                                let d0 = if keep { a[$i] * ($d0) } else { 0.0 };
                                let d1 = if keep { a[$j] * ($d1) } else { 0.0 };
                                p[$i] = if $first0 { d0 } else { p[$i] + d0 };
                                q[$i] = if $first1 { d1 } else { q[$i] + d1 };
                            }
                        };
                    }
                    match (f0, f1) {
                        (true, true) => pass!(true, true),
                        (true, false) => pass!(true, false),
                        (false, true) => pass!(false, true),
                        (false, false) => pass!(false, false),
                    }
                }
                _ => {
                    acc!($m0, |$i| $d0);
                    acc!($m1, |$j| $d1);
                }
            }
        }};
    }
    // The shares of a fused operation's three arguments, `$d` giving the three partials (which
    // share a value, a reciprocal): those that take one in one loop; where two take into one
    // entry, a loop each.
    macro_rules! acc3 {
        (|$i:ident| $d:expr) => {{
            let targets = [0, 1, 2].map(|m| step.take[m].target());
            // Arguments that take none (a column, a constant, a parameter held fixed): the
            // others' shares alone.
            match targets.map(|t| t.is_none()) {
                [false, false, false] => acc3!(all, |$i| $d),
                [true, false, false] => acc2!(1, 2, |$i| ($d)[1], |$i| ($d)[2]),
                [false, true, false] => acc2!(0, 2, |$i| ($d)[0], |$i| ($d)[2]),
                [false, false, true] => acc2!(0, 1, |$i| ($d)[0], |$i| ($d)[1]),
                [false, true, true] => acc!(0, |$i| ($d)[0]),
                [true, false, true] => acc!(1, |$i| ($d)[1]),
                [true, true, false] => acc!(2, |$i| ($d)[2]),
                [true, true, true] => {}
            }
        }};
        (all, |$i:ident| $d:expr) => {{
            let targets = [0, 1, 2].map(|m| step.take[m].target());
            let entries = targets.map(|t| t.expect("every argument takes a share").0);
            if entries[0] != entries[1] && entries[0] != entries[2] && entries[1] != entries[2] {
                let (a, [p, q, r]) = entry3(store, seed, step.adj, entries);
                for (t, target) in [&mut *p, &mut *q, &mut *r].into_iter().zip(targets) {
                    if matches!(target, Some((_, true))) {
                        *t = ZERO;
                    }
                }
                add_shares3(a, p, q, r, |$i| $d);
            } else {
                acc!(0, |$i| ($d)[0]);
                acc!(1, |$i| ($d)[1]);
                acc!(2, |$i| ($d)[2]);
            }
        }};
    }
    match step.op {
        Op::ExpFma(..) => acc3!(|i| [v[i] * x1[i], v[i] * x0[i], v[i]]),
        Op::LogFma(..) => acc3!(|i| {
            let r = 1.0 / x0[i].mul_add(x1[i], x2[i]);
            [x1[i] * r, x0[i] * r, r]
        }),
        Op::ScaledSq(..) => acc3!(|i| {
            let d = x0[i] - x1[i];
            let u = d * x2[i];
            let us = 2.0 * u * x2[i];
            [us, -us, 2.0 * u * d]
        }),
        Op::Add(_, _) => acc2!(0, 1, |_i| 1.0, |_j| 1.0),
        Op::Sub(_, _) => acc2!(0, 1, |_i| 1.0, |_j| -1.0),
        Op::Mul(_, _) => acc2!(0, 1, |i| x1[i], |j| x0[j]),
        Op::Div(_, _) => acc2!(0, 1, |i| 1.0 / x1[i], |j| -v[j] / x1[j]),
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
        Op::Erfcx(_) => acc!(0, |i| crate::faddeeva::erfcx_prime(x0[i], v[i])),
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
        Op::GammaP(_, _) => acc2!(0, 1, |i| crate::graph::gamma_p(x0[i], x1[i]).1, |j| {
            crate::graph::gamma_p_dy(x0[j], x1[j])
        }),
        // Piecewise constant: no derivative in x.
        Op::Hist(..) => {}
        Op::Spline(_, t) => {
            let t = &tables[t as usize];
            acc!(0, |i| t.slope(x0[i]))
        }
        Op::Select(..) => {
            acc!(1, |i| if x0[i] >= 0.0 { 1.0 } else { 0.0 });
            acc!(2, |i| if x0[i] >= 0.0 { 0.0 } else { 1.0 });
        }
        Op::VoigtRe(..) => acc2!(
            0,
            1,
            |i| crate::faddeeva::re_and_partials(x0[i], x1[i]).1,
            |j| crate::faddeeva::re_and_partials(x0[j], x1[j]).2
        ),
        // Most often one of the factors is uniform and takes no share, or the addend's share is
        // handed its adjoint: two loops at most, one where two arguments take.
        Op::Fma(..) => match step.take {
            [_, Take::No, _] => acc2!(0, 2, |i| x1[i], |_j| 1.0),
            [Take::No, _, _] => acc2!(1, 2, |i| x0[i], |_j| 1.0),
            _ => {
                acc2!(0, 1, |i| x1[i], |j| x0[j]);
                acc!(2, |_i| 1.0);
            }
        },
        Op::Const(_) | Op::Param(_) | Op::Column(_) => {}
    }
}

/// Where a block lies: the boundary nodes' values, the event columns and its first event, or
/// the padded copy of a short last block; its events' weights (`None`: every weight 1).
#[derive(Clone, Copy)]
struct Block<'a> {
    bvals: &'a [f64],
    columns: &'a [&'a [f64]],
    graph_columns: &'a [usize],
    start: usize,
    weights: Option<&'a Lanes>,
    padded: Option<&'a [Lanes]>,
}

impl<'a> Block<'a> {
    /// Entry `p` of the program's columns over this block.
    #[inline(always)]
    fn column(&self, p: u32) -> &'a Lanes {
        match self.padded {
            Some(pad) => &pad[p as usize],
            None => lanes_at(self.columns[self.graph_columns[p as usize]], self.start),
        }
    }
}

/// One block's buffers.
struct Scratch {
    /// Values of the varying nodes, by slot.
    vals: Vec<Lanes>,
    /// The adjoint store (with a gradient): the varying nodes' adjoints (entries `0..slots`,
    /// each node's where [`Bwd::adj`] says), each boundary node's per-lane sums over a
    /// task's blocks (the next entries).
    adj: Vec<Lanes>,
    /// Each boundary node's value broadcast (filled once per evaluation), so that the backward
    /// loops read every argument as a block and hold no branch.
    ubuf: Vec<Lanes>,
    /// Per-lane sums of w E over a task's blocks.
    eacc: Lanes,
    /// Each guarded select's arms this block skips (`NEED_*`, or the bits of skipped arms).
    need: Vec<u8>,
}

/// One varying node over a block.
#[inline(always)]
fn forward(op: Op, x: [Src<'_>; 3], tables: &[Table], out: &mut Lanes) {
    macro_rules! unary {
        ($f:expr) => {{
            #[allow(unused_mut)]
            let mut f = $f;
            match x[0] {
                Src::V(x) => {
                    for i in 0..BLOCK {
                        out[i] = f(x[i]);
                    }
                }
                Src::S(x) => out.fill(f(x)),
            }
        }};
    }
    macro_rules! binary {
        ($f:expr) => {{
            let f = $f;
            match (x[0], x[1]) {
                (Src::V(x), Src::V(y)) => {
                    for i in 0..BLOCK {
                        out[i] = f(x[i], y[i]);
                    }
                }
                (Src::V(x), Src::S(y)) => {
                    for i in 0..BLOCK {
                        out[i] = f(x[i], y);
                    }
                }
                (Src::S(x), Src::V(y)) => {
                    for i in 0..BLOCK {
                        out[i] = f(x, y[i]);
                    }
                }
                (Src::S(x), Src::S(y)) => out.fill(f(x, y)),
            }
        }};
    }
    // The common argument places of a three-argument operation with a loop each, the rest by
    // a per-event choice.
    macro_rules! ternary {
        ($f:expr) => {{
            #[allow(unused_mut)]
            let mut f = $f;
            match x {
                [Src::V(a), Src::S(b), Src::S(c)] => {
                    for i in 0..BLOCK {
                        out[i] = f(a[i], b, c);
                    }
                }
                [Src::V(a), Src::V(b), Src::S(c)] => {
                    for i in 0..BLOCK {
                        out[i] = f(a[i], b[i], c);
                    }
                }
                [Src::V(a), Src::S(b), Src::V(c)] => {
                    for i in 0..BLOCK {
                        out[i] = f(a[i], b, c[i]);
                    }
                }
                [Src::V(a), Src::V(b), Src::V(c)] => {
                    for i in 0..BLOCK {
                        out[i] = f(a[i], b[i], c[i]);
                    }
                }
                [a, b, c] => {
                    for i in 0..BLOCK {
                        out[i] = f(a.at(i), b.at(i), c.at(i));
                    }
                }
            }
        }};
    }
    // e^x and ln x of a block whose arguments all lie where the result is a normal number (a
    // density's exponent, a positive density) take the short path — the same bits, fewer
    // instructions. Of a fused operation's argument (computed here, not read from a buffer),
    // in one pass that notes whether they did; where one did not, the general path over the
    // block again.
    macro_rules! short_path {
        ($each:ident, |$($a:ident),*| $arg:expr, $ok:path, $fast:path, $slow:path) => {{
            let mut normal = true;
            $each!(|$($a: f64),*| {
                let t = $arg;
                normal &= $ok(t);
                $fast(t)
            });
            if !normal {
                $each!(|$($a: f64),*| $slow($arg));
            }
        }};
    }
    let fma = |a: f64, b: f64, c: f64| a.mul_add(b, c);
    match op {
        Op::ExpFma(..) => short_path!(
            ternary,
            |a, b, c| a.mul_add(b, c),
            vmath::exp_is_normal,
            vmath::exp_normal,
            vmath::exp
        ),
        Op::LogFma(..) => short_path!(
            ternary,
            |a, b, c| a.mul_add(b, c),
            vmath::ln_is_normal,
            vmath::ln_normal,
            vmath::ln
        ),
        Op::ScaledSq(..) => ternary!(|a: f64, b: f64, c: f64| {
            let u = (a - b) * c;
            u * u
        }),
        Op::Add(..) => binary!(|x: f64, y: f64| x + y),
        Op::Sub(..) => binary!(|x: f64, y: f64| x - y),
        Op::Mul(..) => binary!(|x: f64, y: f64| x * y),
        Op::Div(..) => binary!(|x: f64, y: f64| x / y),
        Op::Pow(..) => binary!(|x: f64, y: f64| x.powf(y)),
        Op::GammaP(..) => binary!(|x: f64, y: f64| crate::graph::gamma_p(x, y).0),
        Op::VoigtRe(..) => binary!(|x: f64, y: f64| crate::faddeeva::faddeeva(x, y).0),
        Op::Powi(_, 2) => unary!(|x: f64| x * x),
        Op::Powi(_, k) => unary!(|x: f64| x.powi(k)),
        Op::Neg(_) => unary!(|x: f64| -x),
        // Here the argument is in a buffer already: a pass that checks it first costs less than
        // the short path's pass lost where one argument lies outside it (a Crystal Ball's tail
        // ln, NaN over its core, in most blocks).
        Op::Exp(_) => match x[0] {
            Src::V(v) if all(v, vmath::exp_is_normal) => unary!(vmath::exp_normal),
            _ => unary!(vmath::exp),
        },
        Op::Log(_) => match x[0] {
            Src::V(v) if all(v, vmath::ln_is_normal) => unary!(vmath::ln_normal),
            _ => unary!(vmath::ln),
        },
        Op::Sqrt(_) => unary!(f64::sqrt),
        Op::Abs(_) => unary!(f64::abs),
        Op::Erf(_) => unary!(libm::erf),
        Op::Erfcx(_) => unary!(crate::faddeeva::erfcx),
        Op::Sin(_) => unary!(f64::sin),
        Op::Cos(_) => unary!(f64::cos),
        Op::Exprel(_) => unary!(crate::graph::exprel),
        Op::Lgamma(_) => unary!(libm::lgamma),
        Op::LandauLnPdf(_) => unary!(|x: f64| crate::landau::ln_pdf(x).0),
        Op::LandauCdf(_) => unary!(crate::landau::cdf),
        Op::LandauSf(_) => unary!(crate::landau::sf),
        Op::Hist(_, t) | Op::Spline(_, t) => {
            let t = &tables[t as usize];
            unary!(|x: f64| t.at(x))
        }
        Op::Select(..) => {
            let [c, a, b] = x;
            for i in 0..BLOCK {
                out[i] = if c.at(i) >= 0.0 { a.at(i) } else { b.at(i) };
            }
        }
        // What lowering makes: a per-event x times a uniform or per-event y, plus a uniform or
        // per-event c.
        Op::Fma(..) => ternary!(fma),
        Op::Const(_) | Op::Param(_) | Op::Column(_) => {
            unreachable!("uniform nodes and columns are not evaluated per block")
        }
    }
}

/// Whether `ok` holds for every event of a block: without a branch per event (the loop
/// vectorises), so it costs a fraction of what it decides.
#[inline(always)]
fn all(v: &Lanes, ok: impl Fn(f64) -> bool) -> bool {
    v.iter().fold(true, |all, &x| all & ok(x))
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
    let (xc, wc) = (x.chunks_exact(LANES), w[..x.len()].chunks_exact(LANES));
    let (xr, wr) = (xc.remainder(), wc.remainder());
    for (c, d) in xc.zip(wc) {
        for k in 0..LANES {
            lanes[k] += c[k] * d[k];
        }
    }
    for ((l, a), b) in lanes.iter_mut().zip(xr).zip(wr) {
        *l += a * b;
    }
    combine(&lanes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Table;

    thread_local! {
        /// Forward steps skipped by their guards on this thread.
        pub(super) static SKIPPED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// A Crystal Ball's tail and core, and a double-sided one's (selects within selects), are
    /// guarded; over events in order of x, blocks skip the arm none of their events takes.
    /// Value and gradient equal those over the same events shuffled (where blocks take both
    /// arms and skip nothing) to roundings, and the forward-mode gradient; the program with its
    /// guards ignored gives the same bits.
    #[test]
    fn blocks_skip_the_select_arms_their_events_do_not_take() {
        use crate::pdf::{crystal_ball, crystal_ball_double, Domain};
        const DOM: Domain = Domain {
            lo: 60.0,
            hi: 120.0,
        };
        type Shape = fn(&mut Graph, Id, &[Id]) -> Id;
        let n = 6000;
        let sorted: Vec<f64> = (0..n)
            .map(|i| 60.0 + 60.0 * (i as f64 + 0.5) / n as f64)
            .collect();
        // A fixed shuffle (a multiplicative step through the indices, coprime to n).
        let shuffled: Vec<f64> = (0..n).map(|i| sorted[(i * 4_099) % n]).collect();
        let ws: Vec<f64> = (0..n).map(|i| 0.5 + (i % 7) as f64 * 0.1).collect();
        let ws_shuffled: Vec<f64> = (0..n).map(|i| ws[(i * 4_099) % n]).collect();
        let shapes: [(&str, Shape, Vec<f64>); 2] = [
            (
                "Crystal Ball",
                |g, x, p| crystal_ball(g, x, p[0], p[1], p[2], p[3], DOM),
                vec![90.0, 3.0, 1.2, 2.5, 100.0],
            ),
            (
                "double-sided Crystal Ball",
                |g, x, p| crystal_ball_double(g, x, p[0], p[1], p[5], p[2], p[3], p[6], p[7], DOM),
                vec![90.0, 3.0, 1.2, 2.5, 100.0, 4.0, 0.8, 3.5],
            ),
        ];
        for (name, shape, p) in shapes {
            let mut g = Graph::new();
            let params: Vec<Id> = (0..p.len()).map(|i| g.param(i)).collect();
            let x = g.column(0);
            let e = shape(&mut g, x, &params);
            let nu = params[4];
            let prog = Program::new(&g, e, nu);
            assert!(
                prog.fwd.iter().any(|f| f.guard.is_some()),
                "{name}: guarded steps"
            );
            assert_eq!(prog.grouping_column, Some(0), "{name}");
            for w in [None, Some((&ws[..], &ws_shuffled[..]))] {
                let mut g1 = vec![0.0; p.len()];
                SKIPPED.with(|c| c.set(0));
                let v1 = prog.eval(&p, &[&sorted], w.map(|w| w.0), Some(&mut g1));
                assert!(SKIPPED.with(|c| c.get()) > 0, "{name}: nothing skipped");
                let mut g2 = vec![0.0; p.len()];
                let v2 = prog.eval(&p, &[&shuffled], w.map(|w| w.1), Some(&mut g2));
                assert!(
                    (v1 - v2).abs() <= 1e-12 * v1.abs(),
                    "{name}: {v1} against {v2}"
                );
                let (want, scale) = forward_mode_gradient(&prog, &p, &[&sorted], w.map(|w| w.0), 4);
                for j in 0..p.len() {
                    assert!(
                        (g1[j] - g2[j]).abs() <= 1e-10 * scale[j],
                        "{name}: ∂{j} {} against {}",
                        g1[j],
                        g2[j]
                    );
                    assert!(
                        (g1[j] - want[j]).abs() <= 1e-9 * scale[j],
                        "{name}: ∂{j} {} against forward mode {}",
                        g1[j],
                        want[j]
                    );
                }
                // The guards ignored: the same bits (a skipped step's values are read by nothing,
                // and its shares are zeros).
                let mut open = prog.clone();
                open.fwd.iter_mut().for_each(|f| f.guard = None);
                open.bwd.iter_mut().for_each(|b| b.guard = None);
                let mut g3 = vec![0.0; p.len()];
                let v3 = open.eval(&p, &[&sorted], w.map(|w| w.0), Some(&mut g3));
                assert_eq!(v1.to_bits(), v3.to_bits(), "{name}");
                assert_eq!(g1, g3, "{name}");
            }
        }
    }

    /// The AVX-512, AVX2 and baseline builds of a block give the same bits: exp, log, erf,
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
        let mut builds = Vec::new();
        for widest in [2, 1, 0] {
            WIDEST.store(widest, std::sync::atomic::Ordering::Relaxed);
            builds.push((width(), run()));
        }
        WIDEST.store(2, std::sync::atomic::Ordering::Relaxed);
        eprintln!(
            "builds this processor runs: {:?}",
            builds.iter().map(|b| b.0).collect::<Vec<_>>()
        );
        for (w, bits) in &builds[1..] {
            assert_eq!(bits, &builds[0].1, "{w:?} against {:?}", builds[0].0);
        }
    }

    /// The lowering's rewrites (a division by a uniform value, −(u·x), x·y ± u and u − x·y as
    /// fused multiply-adds) give the formula's value and gradient, over a short last block with
    /// weights, one event of which has weight 0 and a log-density of −∞ there.
    #[test]
    fn lowered_programs_give_the_formulas_values() {
        let mut g = Graph::new();
        let (x, y) = (g.column(0), g.column(1));
        let (a, b, c) = (g.param(0), g.param(1), g.param(2));
        let xa = g.div(x, a); // x / a → x · (1/a)
        let bx = g.mul(b, x);
        let nbx = g.neg(bx); // −(b x) → x · (−b)
        let t1 = g.sub(nbx, c); // → fma(x, −b, −c)
        let xy = g.mul(x, y);
        let t2 = g.add(xy, c); // → fma(x, y, c)
        let cy = g.mul(c, y);
        let t3 = g.sub(a, cy); // → fma(y, −c, a)
        let s1 = g.add(xa, t1);
        let s2 = g.add(t2, t3);
        let s = g.add(s1, s2);
        let ly = g.log(y); // −∞ at y = 0
        let e = g.add(s, ly);
        let nu = g.param(3);
        let prog = Program::new(&g, e, nu);
        let n = 1000;
        let xs: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin() * 3.0).collect();
        let mut ys: Vec<f64> = (0..n)
            .map(|i| 0.5 + (i as f64 * 0.11).cos().abs())
            .collect();
        let mut ws: Vec<f64> = (0..n).map(|i| 0.5 + (i % 7) as f64 * 0.1).collect();
        ys[997] = 0.0;
        ws[997] = 0.0;
        let p = [1.3, 0.7, -0.4, 5.0];
        let mut grad = vec![0.0; 4];
        let v = prog.eval(&p, &[&xs, &ys], Some(&ws), Some(&mut grad));
        let (mut f, mut ga, mut gb, mut gc) = (p[3], 0.0, 0.0, 0.0);
        for i in (0..n).filter(|&i| ws[i] != 0.0) {
            let (xi, yi, w) = (xs[i], ys[i], ws[i]);
            let e = xi / p[0] - p[1] * xi - p[2] + xi * yi + p[2] + p[0] - p[2] * yi + yi.ln();
            f -= w * e;
            ga -= w * (-xi / (p[0] * p[0]) + 1.0);
            gb -= w * -xi;
            gc -= w * (-yi);
        }
        assert!((v - f).abs() < 1e-12 * f.abs(), "{v} {f}");
        for (got, want) in grad.iter().zip([ga, gb, gc, 1.0]) {
            assert!(
                (got - want).abs() < 1e-11 * want.abs().max(1.0),
                "{got} {want}"
            );
        }
        // No division is left among the per-event operations.
        let (low, out) = g.lowered(&[e, nu]);
        let need = low.reachable(&out);
        assert!(!low
            .ops()
            .iter()
            .enumerate()
            .any(|(i, op)| need[i] && low.varying(Id(i as u32)) && matches!(op, Op::Div(..))));
        assert!(
            low.ops()
                .iter()
                .filter(|op| matches!(op, Op::Fma(..)))
                .count()
                >= 3
        );
    }

    /// A Gaussian + exponential mixture lowers to five per-event operations (the fused ones)
    /// and gives the formula's −ln L and gradient.
    #[test]
    fn fused_operations_give_the_mixtures_value_and_gradient() {
        let mut g = Graph::new();
        let x = g.column(0);
        let [mu, sigma, c, n1, n2] = [0, 1, 2, 3, 4].map(|i| g.param(i));
        let d = g.sub(x, mu);
        let t = g.div(d, sigma);
        let t2 = g.powi(t, 2);
        let half = g.scale(t2, -0.5);
        let gauss = g.exp(half);
        let cx = g.mul(c, x);
        let expo = g.exp(cx);
        let a = g.mul(n1, gauss);
        let b = g.mul(n2, expo);
        let sum = g.add(a, b);
        let e = g.log(sum);
        let nu = g.add(n1, n2);
        let prog = Program::new(&g, e, nu);
        let fused = |op: &Op| matches!(op, Op::ExpFma(..) | Op::LogFma(..) | Op::ScaledSq(..));
        assert_eq!(prog.fwd.len(), 5, "{:?}", prog.fwd);
        assert_eq!(prog.bwd.len(), 5, "{:?}", prog.bwd);
        assert_eq!(prog.fwd.iter().filter(|f| fused(&f.op)).count(), 4);
        let n = 1000;
        let xs: Vec<f64> = (0..n)
            .map(|i| 60.0 + 60.0 * ((i as f64 * 0.618) % 1.0))
            .collect();
        let p = [91.0, 2.5, -0.03, 300.0, 700.0];
        let mut grad = vec![0.0; 5];
        let v = prog.eval(&p, &[&xs], None, Some(&mut grad));
        let (mut f, mut want) = (p[3] + p[4], [0.0, 0.0, 0.0, 1.0, 1.0]);
        for &x in &xs {
            let t = (x - p[0]) / p[1];
            let (ga, ex) = ((-0.5 * t * t).exp(), (p[2] * x).exp());
            let y = p[3] * ga + p[4] * ex;
            f -= y.ln();
            want[0] -= p[3] * ga * t / p[1] / y;
            want[1] -= p[3] * ga * t * t / p[1] / y;
            want[2] -= p[4] * ex * x / y;
            want[3] -= ga / y;
            want[4] -= ex / y;
        }
        assert!((v - f).abs() < 1e-12 * f.abs(), "{v} {f}");
        for (got, want) in grad.iter().zip(want) {
            assert!(
                (got - want).abs() < 1e-10 * want.abs().max(1.0),
                "{got} {want}"
            );
        }
    }

    /// A histogram read at a point a parameter moves passes no derivative, and the argument's
    /// other reader still gets its own (the backward pass's first write is not the histogram's).
    #[test]
    fn a_histogram_of_a_moving_argument_passes_no_derivative() {
        let mut g = Graph::new();
        let x = g.column(0);
        let mu = g.param(0);
        let d = g.sub(x, mu);
        let t = g.table(Table::new(vec![-10.0, 0.0, 10.0], vec![0.3, 0.7]));
        let h = g.hist(d, t);
        let d2 = g.powi(d, 2);
        let q = g.scale(d2, -0.5);
        let e = g.add(h, q);
        let nu = g.param(1);
        let prog = Program::new(&g, e, nu);
        let xs: Vec<f64> = (0..640).map(|i| ((i as f64 * 0.37).sin()) * 3.0).collect();
        let p = [0.4, 2.0];
        let mut grad = vec![0.0; 2];
        prog.eval(&p, &[&xs], None, Some(&mut grad));
        // −Σ ∂E/∂μ = −Σ (x − μ).
        let want: f64 = -xs.iter().map(|x| x - p[0]).sum::<f64>();
        assert!(
            (grad[0] - want).abs() < 1e-10 * want.abs().max(1.0),
            "{} {want}",
            grad[0]
        );
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

    /// −Σ w ∂E/∂θ (plus 1 for the uniform term, parameter `nu`) from the forward-mode
    /// tangents of [`Program::event_jacobian`], which do not use the backward pass; and per
    /// parameter the sum of the terms' sizes, the scale a rounding difference is measured by.
    fn forward_mode_gradient(
        prog: &Program,
        p: &[f64],
        cols: &[&[f64]],
        w: Option<&[f64]>,
        nu: usize,
    ) -> (Vec<f64>, Vec<f64>) {
        let which: Vec<usize> = (0..p.len()).collect();
        let jac = prog.event_jacobian(p, cols, &which);
        let mut g = vec![0.0; p.len()];
        let mut scale = vec![1.0; p.len()];
        for j in 0..p.len() {
            if j == nu {
                g[j] += 1.0;
            }
            for (i, d) in jac[j].iter().enumerate() {
                let wi = w.map_or(1.0, |w| w[i]);
                if wi != 0.0 {
                    g[j] -= wi * d;
                    scale[j] += (wi * d).abs();
                }
            }
        }
        (g, scale)
    }

    /// The backward pass's gradient equals the forward-mode one (to 1e-9 of the terms' sizes)
    /// and evaluating it leaves the value's bits as they are.
    fn backward_agrees(g: &Graph, e: Id, nu: Id, cols: &[&[f64]], w: Option<&[f64]>) -> bool {
        let p = [0.3, 0.7, -0.4, 1.1, 5.0];
        let prog = Program::new(g, e, nu);
        let mut grad = vec![0.0; p.len()];
        let v = prog.eval(&p, cols, w, Some(&mut grad));
        let same_value = v.to_bits() == prog.eval(&p, cols, w, None).to_bits();
        let (want, scale) = forward_mode_gradient(&prog, &p, cols, w, p.len() - 1);
        // The program with its guards ignored (nothing skipped, so independent of the skipping
        // that the forward mode's own pass shares): the same bits.
        let mut open = prog.clone();
        open.fwd.iter_mut().for_each(|f| f.guard = None);
        open.bwd.iter_mut().for_each(|b| b.guard = None);
        let mut g_open = vec![0.0; p.len()];
        let v_open = open.eval(&p, cols, w, Some(&mut g_open));
        let unguarded = v_open.to_bits() == v.to_bits()
            && grad
                .iter()
                .zip(&g_open)
                .all(|(a, b)| a.to_bits() == b.to_bits() || !(a.is_finite() && b.is_finite()));
        same_value
            && unguarded
            && (0..p.len()).all(|j| (grad[j] - want[j]).abs() <= 1e-9 * scale[j])
    }

    /// Events of two columns (x around 0, y positive) and weights with zeros among them.
    fn two_columns(n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let xs = (0..n).map(|i| (i as f64 * 0.37).sin() * 1.5).collect();
        let ys = (0..n)
            .map(|i| 0.5 + (i as f64 * 0.11).cos().abs())
            .collect();
        let ws = (0..n)
            .map(|i| match i % 5 {
                3 => 0.0,
                _ => 0.5 + (i % 7) as f64 * 0.1,
            })
            .collect();
        (xs, ys, ws)
    }

    /// The shapes where adjoint buffers are shared — a term used twice by one node, a sum's
    /// term handed its node's buffer and then added to by other readers, an event term that
    /// is itself a sum, a column or a product, a node no parameter moves in between — over a
    /// short block, exact blocks and several tasks, with and without weights.
    #[test]
    fn shared_adjoint_buffers_give_the_forward_mode_gradient() {
        type Shape = fn(&mut Graph) -> Id;
        fn wave(g: &mut Graph, p: usize, col: usize) -> Id {
            let (a, x) = (g.param(p), g.column(col));
            let t = g.mul(a, x);
            g.sin(t)
        }
        let shapes: [(&str, Shape); 10] = [
            ("t + t as the event term", |g| {
                let t = wave(g, 0, 0);
                g.add(t, t)
            }),
            ("t · t", |g| {
                let t = wave(g, 0, 0);
                g.mul(t, t)
            }),
            ("(t − t) + t", |g| {
                let t = wave(g, 0, 0);
                let d = g.sub(t, t);
                g.add(d, t)
            }),
            ("fma(t, t, t)", |g| {
                let t = wave(g, 0, 0);
                g.fma(t, t, t)
            }),
            ("fma(t, y, t)", |g| {
                let (t, y) = (wave(g, 0, 0), g.column(1));
                g.fma(t, y, t)
            }),
            ("ln of a sum of three products", |g| {
                let (f1, f2, f3) = (wave(g, 0, 0), wave(g, 1, 1), wave(g, 2, 0));
                let (a, b, c) = (g.param(0), g.param(1), g.param(2));
                let (t1, t2, t3) = (g.mul(f1, c), g.mul(f2, a), g.mul(f3, b));
                let s = g.add(t1, t2);
                let s = g.add(s, t3);
                let four = g.constant(4.0);
                let s = g.add(s, four);
                g.log(s)
            }),
            ("a select's branches sharing a term", |g| {
                let (t, x, b) = (wave(g, 0, 0), g.column(0), g.param(1));
                let (u, v) = (g.add(t, b), g.sub(t, b));
                let s = g.select(x, u, v);
                g.add(s, t)
            }),
            ("a diamond of sums", |g| {
                let (c1, z, c) = (wave(g, 0, 0), wave(g, 1, 0), g.param(2));
                let pp = g.add(c1, z);
                let q = g.mul(pp, c);
                let n1 = g.add(c1, q);
                let n2 = g.add(n1, pp);
                g.add(n2, c1)
            }),
            ("a sum through a node no parameter moves", |g| {
                let (x, b) = (g.column(0), g.param(1));
                let (cx, t) = (g.exp(x), wave(g, 0, 0));
                let m = g.add(cx, t);
                let m2 = g.sub(m, cx);
                let m3 = g.mul(m2, b);
                g.add(m3, m)
            }),
            ("an event term no parameter moves", |g| g.column(0)),
        ];
        for n in [1, 127, 128, 129, 40_000] {
            let (xs, ys, ws) = two_columns(n);
            let cols: [&[f64]; 2] = [&xs, &ys];
            for (name, shape) in &shapes {
                let mut g = Graph::new();
                let e = shape(&mut g);
                let nu = g.param(4);
                for w in [None, Some(&ws[..])] {
                    assert!(
                        backward_agrees(&g, e, nu, &cols, w),
                        "{name}, {n} events, weights {}",
                        w.is_some()
                    );
                }
            }
        }
    }

    /// Random graphs with much sharing and repeated arguments (sums, differences, products,
    /// multiply-adds, selects, mixtures' sums of products): the backward pass's gradient is
    /// the forward-mode one.
    #[test]
    fn random_graphs_give_the_forward_mode_gradient() {
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = move |k: usize| -> usize {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % k as u64) as usize
        };
        let (xs, ys, ws) = two_columns(300);
        let cols: [&[f64]; 2] = [&xs, &ys];
        // The same columns in ascending order: conditions that follow them take one arm over
        // whole blocks, which then skip the other's steps.
        let (mut xs_up, mut ys_up) = (xs.clone(), ys.clone());
        xs_up.sort_by(f64::total_cmp);
        ys_up.sort_by(f64::total_cmp);
        let sorted: [&[f64]; 2] = [&xs_up, &ys_up];
        SKIPPED.with(|c| c.set(0));
        let mut checked = 0;
        for trial in 0..400 {
            let mut g = Graph::new();
            let params: Vec<Id> = (0..4).map(|i| g.param(i)).collect();
            let mut pool = vec![g.column(0), g.column(1)];
            for k in 0..3 {
                let t = g.mul(params[k], pool[k % 2]);
                pool.push(g.sin(t));
            }
            for _ in 0..6 + rnd(25) {
                let pick = |r: usize, pool: &[Id]| pool[pool.len() - 1 - r % pool.len().min(6)];
                let a = pick(rnd(100), &pool);
                let b = if rnd(4) == 0 {
                    a
                } else {
                    pick(rnd(100), &pool)
                };
                let c = if rnd(4) == 0 {
                    a
                } else {
                    pick(rnd(100), &pool)
                };
                let u = params[rnd(4)];
                let new = match rnd(16) {
                    0 => g.add(a, b),
                    1 => g.sub(a, b),
                    2 => g.mul(a, b),
                    3 => g.fma(a, b, c),
                    4 => g.fma(a, u, c),
                    5 => g.select(a, b, c),
                    6 => {
                        let s = g.sin(a);
                        g.exp(s)
                    }
                    7 => {
                        let three = g.constant(3.0);
                        let s = g.sin(a);
                        let d = g.add(three, s);
                        g.log(d)
                    }
                    8 => {
                        let (x, y) = (g.mul(a, u), g.mul(b, params[rnd(4)]));
                        g.add(x, y)
                    }
                    9 => {
                        let x = g.mul(a, u);
                        g.sub(b, x)
                    }
                    10 => g.powi(a, 2),
                    // The fused operations' shapes: e^(fma), ln(fma) (its arguments one buffer
                    // or three), ((a − b) · u)².
                    11 => {
                        let (s, t) = (g.sin(a), g.sin(c));
                        let m = g.fma(s, u, t);
                        g.exp(m)
                    }
                    12 => {
                        let s = g.sin(a);
                        let k = g.constant(if rnd(2) == 0 { 2.0 } else { 3.0 });
                        let m = if rnd(2) == 0 {
                            g.fma(s, s, k)
                        } else {
                            g.fma(s, u, k)
                        };
                        g.log(m)
                    }
                    13 => {
                        let d = g.sub(a, b);
                        let m = g.mul(d, u);
                        g.powi(m, 2)
                    }
                    // A fused operation two of whose arguments take no share (constants).
                    14 => {
                        let s = g.sin(a);
                        let (k, l) = (g.constant(0.5), g.constant(3.0));
                        let m = g.fma(s, k, l);
                        if rnd(2) == 0 {
                            g.log(m)
                        } else {
                            g.exp(m)
                        }
                    }
                    _ => {
                        let x = g.mul(a, b);
                        g.add(x, c)
                    }
                };
                pool.push(new);
            }
            let (last, before) = (pool[pool.len() - 1], pool[pool.len() - 2]);
            let e = match rnd(4) {
                0 => g.add(last, before),
                1 => g.fma(last, before, last),
                2 => g.add(last, last),
                _ => last,
            };
            let nu = g.param(4);
            let v = Program::new(&g, e, nu).eval(&[0.3, 0.7, -0.4, 1.1, 5.0], &cols, None, None);
            if !v.is_finite() || v.abs() > 1e8 {
                continue;
            }
            checked += 1;
            for w in [None, Some(&ws[..])] {
                assert!(backward_agrees(&g, e, nu, &cols, w), "graph {trial}");
                assert!(
                    backward_agrees(&g, e, nu, &sorted, w),
                    "graph {trial}, sorted"
                );
            }
        }
        assert!(checked > 200, "{checked} graphs with finite values");
        // Some blocks of the sorted columns skipped guarded steps.
        assert!(SKIPPED.with(|c| c.get()) > 1000);
    }

    /// A block with one NaN argument takes the general e^x and ln x (NaN there, the others as
    /// on the short path), and the ends of the short paths' ranges are kept.
    #[test]
    fn blocks_outside_the_short_paths_take_the_general_ones() {
        let run = |op: Op, v: &Lanes| {
            let mut out = ZERO;
            forward(op, [Src::V(v), Src::S(0.0), Src::S(0.0)], &[], &mut out);
            out
        };
        let mut v = [1.0; BLOCK];
        v[77] = f64::NAN;
        assert!(!all(&v, vmath::exp_is_normal) && !all(&v, vmath::ln_is_normal));
        let e = run(Op::Exp(Id(0)), &v);
        assert!(e[77].is_nan() && e[0] == std::f64::consts::E);
        let l = run(Op::Log(Id(0)), &v);
        assert!(l[77].is_nan() && l[0] == 0.0);
        let mut w = [2.0; BLOCK];
        for (x, want_exp, want_ln) in [
            (-0.0, 1.0, f64::NEG_INFINITY),
            (710.0, f64::INFINITY, 710f64.ln()),
            (-746.0, 0.0, f64::NAN),
        ] {
            w[5] = x;
            let (e, l) = (run(Op::Exp(Id(0)), &w), run(Op::Log(Id(0)), &w));
            assert_eq!(e[5], want_exp, "e^{x}");
            assert!(
                l[5] == want_ln || (l[5].is_nan() && want_ln.is_nan()),
                "ln {x}"
            );
        }
    }
}
