//! The typed expression graph every event-level model is built from: named PDFs, HS3
//! `generic_*` expressions and the likelihood's own sums are all nodes of one [`Graph`], so a PDF
//! is defined once — as the nodes it adds — and every evaluator derives from that definition
//! (the CPU one in [`crate::program`]; device code generators later walk the same nodes).
//!
//! Nodes are appended in topological order (an operation's arguments always exist before it),
//! shared where equal (a node asked twice is made once) and folded where their arguments are
//! constants. Each node knows whether it depends on the events (`varying`): what does not is
//! evaluated once per parameter point, outside the event loop (normalisation integrals, yields,
//! constraint terms).

use std::collections::HashMap;

/// A node of a [`Graph`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id(pub u32);

/// One operation. Arguments are earlier nodes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    Const(f64),
    /// Parameter `i` of the likelihood's parameter vector.
    Param(usize),
    /// Event column `j` (an observable, or a per-event value such as a weight variation).
    Column(usize),
    Add(Id, Id),
    Sub(Id, Id),
    Mul(Id, Id),
    Div(Id, Id),
    /// x^y for real y (x > 0 where y is not an integer constant: see [`Op::Powi`]).
    Pow(Id, Id),
    /// x^k for an integer constant k.
    Powi(Id, i32),
    Neg(Id),
    Exp(Id),
    Log(Id),
    Sqrt(Id),
    Abs(Id),
    Erf(Id),
    /// erfcx(x) = e^(x²) erfc(x), the scaled complementary error function
    /// ([`crate::faddeeva::erfcx`]).
    Erfcx(Id),
    Sin(Id),
    Cos(Id),
    /// (1 − e^(−t)) / t, and 1 at t = 0: the normalisation of an exponential without the
    /// cancellation of the direct formula near t = 0.
    Exprel(Id),
    /// ln Γ(x) for x > 0 (a Poisson term's ln k! = ln Γ(k + 1)).
    Lgamma(Id),
    /// P(a, y) = γ(a, y) / Γ(a), the regularised lower incomplete gamma function, for a > 0
    /// (0 for y ≤ 0): the integral of a generalised normal density up to a point.
    GammaP(Id, Id),
    /// ln φ(λ), φ the Landau density ([`crate::landau`]).
    LandauLnPdf(Id),
    /// The Landau distribution function Φ(λ) and its complement Q(λ) = 1 − Φ(λ).
    LandauCdf(Id),
    LandauSf(Id),
    /// The value of the bin of table `t` ([`Graph::tables`]) holding x: a histogram's
    /// piecewise-constant density; 0 outside its edges (and for NaN). Its derivative in x is 0.
    Hist(Id, u32),
    /// `a` where `c ≥ 0`, else `b` (piecewise PDFs: tails, domain splits). The derivative flows
    /// to the branch taken; `c` itself gets none.
    Select(Id, Id, Id),
    /// a · b + c, rounded once: what [`Graph::lowered`] makes of a product and a sum.
    Fma(Id, Id, Id),
    /// Re w(x + iy), w the Faddeeva function ([`crate::faddeeva`]), for y ≥ 0: the Voigt
    /// profile's shape.
    VoigtRe(Id, Id),
    /// The cubic spline of table `t` at x (0 outside its knots), with its derivative in x.
    Spline(Id, u32),
    /// e^(a · b + c), the multiply-add rounded once: what [`Graph::lowered`] makes of the
    /// exponential of a multiply-add of no other use (an exponential-family density).
    ExpFma(Id, Id, Id),
    /// ln(a · b + c): lowered from the logarithm of a multiply-add of no other use (a
    /// mixture's log-density).
    LogFma(Id, Id, Id),
    /// ((a − b) · c)²: lowered from the square of a scaled difference of no other use (a
    /// Gaussian's exponent).
    ScaledSq(Id, Id, Id),
}

impl Op {
    /// The arguments of the operation, in order.
    pub fn args(&self) -> ArgIter {
        let (v, n) = match *self {
            Op::Const(_) | Op::Param(_) | Op::Column(_) => ([Id(0); 3], 0),
            Op::Add(a, b)
            | Op::Sub(a, b)
            | Op::Mul(a, b)
            | Op::Div(a, b)
            | Op::Pow(a, b)
            | Op::GammaP(a, b)
            | Op::VoigtRe(a, b) => ([a, b, Id(0)], 2),
            Op::Powi(a, _)
            | Op::Neg(a)
            | Op::Exp(a)
            | Op::Log(a)
            | Op::Sqrt(a)
            | Op::Abs(a)
            | Op::Erf(a)
            | Op::Erfcx(a)
            | Op::Sin(a)
            | Op::Cos(a)
            | Op::Exprel(a)
            | Op::Lgamma(a)
            | Op::LandauLnPdf(a)
            | Op::LandauCdf(a)
            | Op::LandauSf(a)
            | Op::Hist(a, _)
            | Op::Spline(a, _) => ([a, Id(0), Id(0)], 1),
            Op::Select(c, a, b)
            | Op::Fma(c, a, b)
            | Op::ExpFma(c, a, b)
            | Op::LogFma(c, a, b)
            | Op::ScaledSq(c, a, b) => ([c, a, b], 3),
        };
        ArgIter { v, n, at: 0 }
    }

    /// A key under which equal operations hash alike (constants by their bits).
    fn key(&self) -> (u8, u64, u64, u64) {
        let id = |x: Id| x.0 as u64;
        match *self {
            Op::Const(c) => (0, c.to_bits(), 0, 0),
            Op::Param(i) => (1, i as u64, 0, 0),
            Op::Column(j) => (2, j as u64, 0, 0),
            Op::Add(a, b) => (3, id(a), id(b), 0),
            Op::Sub(a, b) => (4, id(a), id(b), 0),
            Op::Mul(a, b) => (5, id(a), id(b), 0),
            Op::Div(a, b) => (6, id(a), id(b), 0),
            Op::Pow(a, b) => (7, id(a), id(b), 0),
            Op::Powi(a, k) => (8, id(a), k as u32 as u64, 0),
            Op::Neg(a) => (9, id(a), 0, 0),
            Op::Exp(a) => (10, id(a), 0, 0),
            Op::Log(a) => (11, id(a), 0, 0),
            Op::Sqrt(a) => (12, id(a), 0, 0),
            Op::Abs(a) => (13, id(a), 0, 0),
            Op::Erf(a) => (14, id(a), 0, 0),
            Op::Sin(a) => (15, id(a), 0, 0),
            Op::Cos(a) => (16, id(a), 0, 0),
            Op::Exprel(a) => (17, id(a), 0, 0),
            Op::Lgamma(a) => (19, id(a), 0, 0),
            Op::Hist(a, t) => (20, id(a), t as u64, 0),
            Op::GammaP(a, b) => (21, id(a), id(b), 0),
            Op::LandauLnPdf(a) => (22, id(a), 0, 0),
            Op::LandauCdf(a) => (23, id(a), 0, 0),
            Op::LandauSf(a) => (24, id(a), 0, 0),
            Op::Select(c, a, b) => (18, id(c), id(a), id(b)),
            Op::Fma(a, b, c) => (25, id(a), id(b), id(c)),
            Op::VoigtRe(a, b) => (26, id(a), id(b), 0),
            Op::Spline(a, t) => (27, id(a), t as u64, 0),
            Op::Erfcx(a) => (28, id(a), 0, 0),
            Op::ExpFma(a, b, c) => (29, id(a), id(b), id(c)),
            Op::LogFma(a, b, c) => (30, id(a), id(b), id(c)),
            Op::ScaledSq(a, b, c) => (31, id(a), id(b), id(c)),
        }
    }
}

/// The arguments of an [`Op`].
pub struct ArgIter {
    v: [Id; 3],
    n: usize,
    at: usize,
}

impl Iterator for ArgIter {
    type Item = Id;
    fn next(&mut self) -> Option<Id> {
        (self.at < self.n).then(|| {
            self.at += 1;
            self.v[self.at - 1]
        })
    }
}

/// (1 − e^(−t)) / t, continued by its series near 0.
pub fn exprel(t: f64) -> f64 {
    if t.abs() < 1e-5 {
        1.0 - t / 2.0 + t * t / 6.0
    } else {
        -libm::expm1(-t) / t
    }
}

/// d/dt of [`exprel`]: (e^(−t)(1 + t) − 1) / t², by its Taylor series
/// Σ_{k≥1} (−1)^k k t^(k−1) / (k+1)! where |t| < 1/2 (the closed form cancels there, losing
/// ε/t² relative), else the closed form.
pub fn exprel_prime(t: f64) -> f64 {
    if t.abs() < 0.5 {
        // Horner from the 20th term down: (1/2)^20 / 21! is far below ε.
        let mut acc = 0.0;
        for k in (1..=20).rev() {
            let fact: f64 = (1..=k + 1).map(|j| j as f64).product();
            let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
            acc = acc * t + sign * k as f64 / fact;
        }
        acc
    } else {
        ((-t).exp() * (1.0 + t) - 1.0) / (t * t)
    }
}

/// ψ(x) = d ln Γ(x)/dx (ln |Γ| below 0, as `lgamma` gives): the recurrence ψ(x) = ψ(x + 1) − 1/x
/// up to x ≥ 10, then the asymptotic series ln x − 1/(2x) − Σ B₂ₖ/(2k x²ᵏ) to the x⁻¹⁴ term
/// (below 1e-16 there); below 0 the reflection ψ(x) = ψ(1 − x) − π cot(πx); NaN at the poles
/// (0, −1, −2, …).
pub fn digamma(x: f64) -> f64 {
    if x.is_nan() || x.is_infinite() || (x <= 0.0 && x.fract() == 0.0) {
        return f64::NAN;
    }
    if x < 0.0 {
        let pi = std::f64::consts::PI;
        return digamma(1.0 - x) - pi / (pi * x).tan();
    }
    let (mut x, mut shift) = (x, 0.0);
    while x < 10.0 {
        shift -= 1.0 / x;
        x += 1.0;
    }
    let z = 1.0 / (x * x);
    // B₂ₖ/(2k): 1/12, −1/120, 1/252, −1/240, 1/132, −691/32760, 1/12.
    let series = z
        * (1.0 / 12.0
            - z * (1.0 / 120.0
                - z * (1.0 / 252.0
                    - z * (1.0 / 240.0 - z * (1.0 / 132.0 - z * (691.0 / 32760.0 - z / 12.0))))));
    shift + x.ln() - 0.5 / x - series
}

/// The most series terms [`gamma_p`] sums on either side of its peak: about 10√y + 40 are
/// needed, so y up to 10^10 is summed whole (larger y with a far below it has Q under the
/// smallest double and returns before the series); beyond it (a and y both past 10^10: hostile
/// input) the answer is NaN, not a sum cut short.
const MAX_TERMS: u64 = 1_000_000;

/// P(a, y) = γ(a, y)/Γ(a) and ∂P/∂a, for a > 0 (NaN for a not finite).
///
/// By the series P = Σ_n t_n, t_n = y^(a+n) e^(−y) / Γ(a + n + 1), summed outward from its
/// largest term (n ≈ y − a, computed in logarithms, so that neither end under- or overflows);
/// ∂t_n/∂a = t_n (ln y − ψ(a + n + 1)), ψ stepped by ψ(z + 1) = ψ(z) + 1/z. All terms are
/// positive, so P's error is the largest term's rounding, about (1 + y) ε relative (the
/// exponential of y); where Q = 1 − P is below the smallest double
/// (y^(a−1) e^(−y)/Γ(a) < e^(−745)) P is 1 and its derivatives 0. The series needs about
/// 2·(10√y + 20) terms: this serves normalisation integrals, evaluated once per point.
pub fn gamma_p(a: f64, y: f64) -> (f64, f64) {
    if a.is_nan() || y.is_nan() || a <= 0.0 || a.is_infinite() {
        return (f64::NAN, f64::NAN);
    }
    if y <= 0.0 {
        return (0.0, 0.0);
    }
    if y == f64::INFINITY {
        return (1.0, 0.0);
    }
    let ln_y = y.ln();
    if y > a && (a - 1.0) * ln_y - y - libm::lgamma(a) < -745.0 {
        return (1.0, 0.0);
    }
    let peak = (y - a).floor().max(0.0);
    let z = a + peak + 1.0;
    let t_peak = ((a + peak) * ln_y - y - libm::lgamma(z)).exp();
    let psi_peak = digamma(z);
    let (mut sum, mut dsum) = (0.0, 0.0);
    // Upward from the peak: t_(n+1) = t_n y / (a + n + 1).
    let (mut t, mut psi, mut z_n) = (t_peak, psi_peak, z);
    let mut terms = 0;
    loop {
        sum += t;
        dsum += t * (ln_y - psi);
        t *= y / z_n;
        psi += 1.0 / z_n;
        z_n += 1.0;
        terms += 1;
        if t <= 1e-17 * sum && z_n > y {
            break;
        }
        // A term not finite (hostile a or y) is the answer's NaN; a sum cut short is not an
        // answer either (z_n + 1 is z_n beyond 2^53).
        if !t.is_finite() || terms > MAX_TERMS {
            return (f64::NAN, f64::NAN);
        }
    }
    // Downward: t_(n−1) = t_n (a + n) / y, ψ(a + n) = ψ(a + n + 1) − 1/(a + n).
    let (mut t, mut psi) = (t_peak, psi_peak);
    let mut n = peak as u64;
    while n > 0 {
        let z_n = a + n as f64;
        t *= z_n / y;
        psi -= 1.0 / z_n;
        n -= 1;
        sum += t;
        dsum += t * (ln_y - psi);
        if t <= 1e-17 * sum {
            break;
        }
        if !t.is_finite() || peak as u64 - n > MAX_TERMS {
            return (f64::NAN, f64::NAN);
        }
    }
    (sum.min(1.0), dsum)
}

/// ∂P(a, y)/∂y = y^(a−1) e^(−y) / Γ(a): 0 for y < 0, and at y = 0 its limit (0 for a > 1, 1
/// for a = 1, ∞ for a < 1).
pub fn gamma_p_dy(a: f64, y: f64) -> f64 {
    if y < 0.0 || (y == 0.0 && a > 1.0) {
        return 0.0;
    }
    if y == 0.0 && a == 1.0 {
        return 1.0;
    }
    ((a - 1.0) * y.ln() - y - libm::lgamma(a)).exp()
}

/// 2/√π.
pub const TWO_OVER_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;

/// A piecewise function of one variable, 0 outside its edges: constant, `values[b]` on
/// [edges[b], edges[b + 1]) (the last bin closed) — a histogram ([`Op::Hist`]) — or cubic,
/// values[b] + b t + c t² + d t³ with t = x − edges[b] — a spline ([`Op::Spline`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    edges: Vec<f64>,
    values: Vec<f64>,
    /// (first edge, 1 / width) where every bin has one width: the bin by a multiplication.
    uniform: Option<(f64, f64)>,
    /// A spline's higher coefficients (b, c, d) per piece.
    cubic: Option<Vec<[f64; 3]>>,
}

impl Table {
    /// A table of `values.len()` bins between increasing `edges` (one more than the values).
    pub fn new(edges: Vec<f64>, values: Vec<f64>) -> Table {
        assert_eq!(edges.len(), values.len() + 1, "one edge more than values");
        let n = values.len();
        let width = (edges[n] - edges[0]) / n as f64;
        let uniform = edges
            .iter()
            .enumerate()
            .all(|(b, &e)| (e - (edges[0] + b as f64 * width)).abs() <= 1e-12 * width)
            .then_some((edges[0], 1.0 / width));
        Table {
            edges,
            values,
            uniform,
            cubic: None,
        }
    }

    /// A cubic spline over increasing `knots`: `pieces[k]` = (a, b, c, d) on
    /// [knots[k], knots[k + 1]], in t = x − knots[k].
    pub fn cubic(knots: Vec<f64>, pieces: &[[f64; 4]]) -> Table {
        let mut t = Table::new(knots, pieces.iter().map(|p| p[0]).collect());
        t.cubic = Some(pieces.iter().map(|p| [p[1], p[2], p[3]]).collect());
        t
    }

    /// The spline's derivative at x (0 for a histogram, and outside the edges).
    #[inline(always)]
    pub fn slope(&self, x: f64) -> f64 {
        match (&self.cubic, self.bin(x)) {
            (Some(c), Some(b)) => {
                let t = x - self.edges[b];
                let [p1, p2, p3] = c[b];
                p1 + t * (2.0 * p2 + t * 3.0 * p3)
            }
            _ => 0.0,
        }
    }

    pub fn edges(&self) -> &[f64] {
        &self.edges
    }

    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// The piece holding x (None outside the edges, and for NaN).
    #[inline(always)]
    fn bin(&self, x: f64) -> Option<usize> {
        let n = self.values.len();
        // NaN and points outside fail this test.
        if !(x >= self.edges[0] && x <= self.edges[n]) {
            return None;
        }
        let b = match self.uniform {
            Some((lo, inv)) => (((x - lo) * inv) as usize).min(n - 1),
            None => (self.edges.partition_point(|&e| e <= x) - 1).min(n - 1),
        };
        // An edge rounded across x by the uniform formula: the neighbour holds it.
        Some(if x < self.edges[b] {
            b - 1
        } else if b + 1 < n && x >= self.edges[b + 1] {
            b + 1
        } else {
            b
        })
    }

    /// The value at x.
    #[inline(always)]
    pub fn at(&self, x: f64) -> f64 {
        let Some(b) = self.bin(x) else {
            return 0.0;
        };
        match &self.cubic {
            Some(c) => {
                let t = x - self.edges[b];
                let [p1, p2, p3] = c[b];
                self.values[b] + t * (p1 + t * (p2 + t * p3))
            }
            None => self.values[b],
        }
    }
}

/// The expression graph: operations in topological order.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    ops: Vec<Op>,
    varying: Vec<bool>,
    memo: HashMap<(u8, u64, u64, u64), Id>,
    tables: Vec<Table>,
}

impl Graph {
    pub fn new() -> Graph {
        Graph::default()
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    pub fn op(&self, id: Id) -> Op {
        self.ops[id.0 as usize]
    }

    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// The tables [`Op::Hist`] nodes read.
    pub fn tables(&self) -> &[Table] {
        &self.tables
    }

    /// The value of table `table`'s bin holding x (a new table: see [`Graph::table`]).
    pub fn hist(&mut self, x: Id, table: u32) -> Id {
        self.fold(Op::Hist(x, table))
    }

    /// The cubic spline of table `table` at x (a table made by [`Table::cubic`]).
    pub fn spline(&mut self, x: Id, table: u32) -> Id {
        self.fold(Op::Spline(x, table))
    }

    /// Adds a table; its index for [`Graph::hist`].
    pub fn table(&mut self, t: Table) -> u32 {
        self.tables.push(t);
        self.tables.len() as u32 - 1
    }

    /// Whether the node depends on the events.
    pub fn varying(&self, id: Id) -> bool {
        self.varying[id.0 as usize]
    }

    /// The constant a node is, if it is one.
    pub fn constant_of(&self, id: Id) -> Option<f64> {
        match self.op(id) {
            Op::Const(c) => Some(c),
            _ => None,
        }
    }

    fn push(&mut self, op: Op) -> Id {
        let key = op.key();
        if let Some(&id) = self.memo.get(&key) {
            return id;
        }
        let varying = match op {
            Op::Column(_) => true,
            _ => op.args().any(|a| self.varying[a.0 as usize]),
        };
        let id = Id(self.ops.len() as u32);
        self.ops.push(op);
        self.varying.push(varying);
        self.memo.insert(key, id);
        id
    }

    /// Folds an operation all of whose arguments are constants into its value.
    fn fold(&mut self, op: Op) -> Id {
        let all_const = op.args().all(|a| self.constant_of(a).is_some());
        if all_const && !matches!(op, Op::Const(_) | Op::Param(_) | Op::Column(_)) {
            let v = eval_scalar(
                op,
                &|a| self.constant_of(a).unwrap_or(f64::NAN),
                &self.tables,
            );
            return self.push(Op::Const(v));
        }
        self.push(op)
    }

    pub fn constant(&mut self, v: f64) -> Id {
        self.push(Op::Const(v))
    }
    pub fn param(&mut self, i: usize) -> Id {
        self.push(Op::Param(i))
    }
    pub fn column(&mut self, j: usize) -> Id {
        self.push(Op::Column(j))
    }
    pub fn add(&mut self, a: Id, b: Id) -> Id {
        match (self.constant_of(a), self.constant_of(b)) {
            (Some(0.0), _) => b,
            (_, Some(0.0)) => a,
            // (x − b) + b and a + (x − a) are x (an extended mixture's ln f + ln Σν: one pass
            // per event fewer, and no rounding of the round trip).
            _ => match (self.op(a), self.op(b)) {
                (Op::Sub(x, c), _) if c == b => x,
                (_, Op::Sub(x, c)) if c == a => x,
                _ => self.fold(Op::Add(a, b)),
            },
        }
    }
    pub fn sub(&mut self, a: Id, b: Id) -> Id {
        match self.constant_of(b) {
            Some(0.0) => a,
            // (x + b) − b and (b + x) − b are x.
            _ => match self.op(a) {
                Op::Add(x, c) if c == b => x,
                Op::Add(c, x) if c == b => x,
                _ => self.fold(Op::Sub(a, b)),
            },
        }
    }
    pub fn mul(&mut self, a: Id, b: Id) -> Id {
        match (self.constant_of(a), self.constant_of(b)) {
            (Some(1.0), _) => b,
            (_, Some(1.0)) => a,
            _ => self.fold(Op::Mul(a, b)),
        }
    }
    pub fn div(&mut self, a: Id, b: Id) -> Id {
        match self.constant_of(b) {
            Some(1.0) => a,
            _ => self.fold(Op::Div(a, b)),
        }
    }
    /// x^y: an integer constant y becomes [`Op::Powi`] (defined for x < 0, and exact).
    pub fn pow(&mut self, x: Id, y: Id) -> Id {
        match self.constant_of(y) {
            Some(k) if k.fract() == 0.0 && k.abs() <= 64.0 => self.powi(x, k as i32),
            Some(0.5) => self.sqrt(x),
            _ => self.fold(Op::Pow(x, y)),
        }
    }
    pub fn powi(&mut self, x: Id, k: i32) -> Id {
        match k {
            0 => self.constant(1.0),
            1 => x,
            _ => self.fold(Op::Powi(x, k)),
        }
    }
    pub fn neg(&mut self, a: Id) -> Id {
        match self.op(a) {
            Op::Neg(inner) => inner,
            _ => self.fold(Op::Neg(a)),
        }
    }
    pub fn exp(&mut self, a: Id) -> Id {
        self.fold(Op::Exp(a))
    }
    pub fn log(&mut self, a: Id) -> Id {
        match self.op(a) {
            Op::Exp(inner) => inner,
            _ => self.fold(Op::Log(a)),
        }
    }
    pub fn sqrt(&mut self, a: Id) -> Id {
        self.fold(Op::Sqrt(a))
    }
    pub fn abs(&mut self, a: Id) -> Id {
        self.fold(Op::Abs(a))
    }
    pub fn erf(&mut self, a: Id) -> Id {
        self.fold(Op::Erf(a))
    }
    pub fn erfcx(&mut self, a: Id) -> Id {
        self.fold(Op::Erfcx(a))
    }
    pub fn sin(&mut self, a: Id) -> Id {
        self.fold(Op::Sin(a))
    }
    pub fn cos(&mut self, a: Id) -> Id {
        self.fold(Op::Cos(a))
    }
    pub fn exprel(&mut self, a: Id) -> Id {
        self.fold(Op::Exprel(a))
    }
    pub fn lgamma(&mut self, a: Id) -> Id {
        self.fold(Op::Lgamma(a))
    }
    pub fn landau_ln_pdf(&mut self, a: Id) -> Id {
        self.fold(Op::LandauLnPdf(a))
    }
    pub fn landau_cdf(&mut self, a: Id) -> Id {
        self.fold(Op::LandauCdf(a))
    }
    pub fn landau_sf(&mut self, a: Id) -> Id {
        self.fold(Op::LandauSf(a))
    }
    /// The regularised lower incomplete gamma function P(a, y).
    pub fn gamma_p(&mut self, a: Id, y: Id) -> Id {
        self.fold(Op::GammaP(a, y))
    }
    /// `a` where `c ≥ 0`, else `b`.
    pub fn select(&mut self, c: Id, a: Id, b: Id) -> Id {
        if a == b {
            return a;
        }
        self.fold(Op::Select(c, a, b))
    }
    /// Re w(x + iy), w the Faddeeva function.
    pub fn voigt_re(&mut self, x: Id, y: Id) -> Id {
        self.fold(Op::VoigtRe(x, y))
    }
    /// a · b + c, rounded once.
    pub fn fma(&mut self, a: Id, b: Id, c: Id) -> Id {
        self.fold(Op::Fma(a, b, c))
    }
    /// `a` where `x ≥ y`, else `b`.
    pub fn select_ge(&mut self, x: Id, y: Id, a: Id, b: Id) -> Id {
        let c = self.sub(x, y);
        self.select(c, a, b)
    }
    pub fn min(&mut self, a: Id, b: Id) -> Id {
        self.select_ge(a, b, b, a)
    }
    pub fn max(&mut self, a: Id, b: Id) -> Id {
        self.select_ge(a, b, a, b)
    }
    /// a · c for a constant c.
    pub fn scale(&mut self, a: Id, c: f64) -> Id {
        let k = self.constant(c);
        self.mul(a, k)
    }
    /// The sum of several nodes, left to right (0 for none).
    pub fn sum(&mut self, xs: &[Id]) -> Id {
        let mut it = xs.iter().copied();
        let Some(first) = it.next() else {
            return self.constant(0.0);
        };
        it.fold(first, |acc, x| self.add(acc, x))
    }

    /// Operation `op` made in this graph with each argument `a` replaced by `m(a)`, through the
    /// constructors (so shared, folded and simplified as they would be).
    pub fn rebuild(&mut self, op: Op, m: impl Fn(Id) -> Id) -> Id {
        match op {
            Op::Const(c) => self.constant(c),
            Op::Param(i) => self.param(i),
            Op::Column(j) => self.column(j),
            Op::Add(a, b) => self.add(m(a), m(b)),
            Op::Sub(a, b) => self.sub(m(a), m(b)),
            Op::Mul(a, b) => self.mul(m(a), m(b)),
            Op::Div(a, b) => self.div(m(a), m(b)),
            Op::Pow(a, b) => self.pow(m(a), m(b)),
            Op::Powi(a, k) => self.powi(m(a), k),
            Op::Neg(a) => self.neg(m(a)),
            Op::Exp(a) => self.exp(m(a)),
            Op::Log(a) => self.log(m(a)),
            Op::Sqrt(a) => self.sqrt(m(a)),
            Op::Abs(a) => self.abs(m(a)),
            Op::Erf(a) => self.erf(m(a)),
            Op::Erfcx(a) => self.erfcx(m(a)),
            Op::Sin(a) => self.sin(m(a)),
            Op::Cos(a) => self.cos(m(a)),
            Op::Exprel(a) => self.exprel(m(a)),
            Op::Lgamma(a) => self.lgamma(m(a)),
            Op::GammaP(a, y) => self.gamma_p(m(a), m(y)),
            Op::LandauLnPdf(a) => self.landau_ln_pdf(m(a)),
            Op::LandauCdf(a) => self.landau_cdf(m(a)),
            Op::LandauSf(a) => self.landau_sf(m(a)),
            // Tables keep their indices: a graph rebuilt from another carries its tables.
            Op::Hist(a, t) => self.hist(m(a), t),
            Op::Select(c, a, b) => self.select(m(c), m(a), m(b)),
            Op::Fma(a, b, c) => self.fma(m(a), m(b), m(c)),
            Op::VoigtRe(a, b) => self.voigt_re(m(a), m(b)),
            Op::Spline(a, t) => self.spline(m(a), t),
            Op::ExpFma(a, b, c) => self.fold(Op::ExpFma(m(a), m(b), m(c))),
            Op::LogFma(a, b, c) => self.fold(Op::LogFma(m(a), m(b), m(c))),
            Op::ScaledSq(a, b, c) => self.fold(Op::ScaledSq(m(a), m(b), m(c))),
        }
    }

    /// The nodes `outputs` need, rebuilt for evaluation over events (with the nodes that
    /// stand for `outputs` there): each rule moves work from the per-event loop into values
    /// computed once per point, or merges two per-event operations into one —
    ///
    /// - x / u (u the same for every event) is x · (1/u): a multiply per event, not a division
    ///   (and none in the derivatives);
    /// - −(u · x) is (−u) · x;
    /// - x · y ± u, where the product has no other use, is one fused multiply-add x · y + (±u);
    ///   so is u ± x · y where y is the same for every event (x · (±y) + u);
    /// - x · y + z and z ± x · u with z per event too (a mixture's sum of its terms), the
    ///   product again of no other use;
    /// - e^m and ln m of a multiply-add or a product m of no other use are one operation each
    ///   ([`Op::ExpFma`], [`Op::LogFma`]), and ((x − y) · u)², its difference and product of no
    ///   other use, is one ([`Op::ScaledSq`]): a Gaussian + exponential mixture's −ln L takes
    ///   five passes over a block of events forward and five back where it took ten each.
    ///
    /// The values change by roundings only (a reciprocal, one rounding fewer in a fused
    /// multiply-add) — and at overflow, where the unrounded product of a multiply-add can
    /// still meet a finite or infinite addend that the rounded one would have met as ±∞ (e.g.
    /// 1.5e308 · 1.5 − ∞ is −∞, not NaN). Fewer per-event operations is what the evaluator's
    /// time is.
    pub fn lowered(&self, outputs: &[Id]) -> (Graph, Vec<Id>) {
        let need = self.reachable(outputs);
        let mut uses = vec![0usize; self.ops.len()];
        for (i, op) in self.ops.iter().enumerate() {
            if need[i] {
                for a in op.args() {
                    uses[a.0 as usize] += 1;
                }
            }
        }
        for o in outputs {
            uses[o.0 as usize] += 1;
        }
        let mut dst = Graph::new();
        dst.tables = self.tables.clone();
        // At most as many nodes as are needed here (a quadrature's tens of thousands): the
        // memo grown once, not rehashed on the way.
        let n_needed = need.iter().filter(|&&k| k).count();
        dst.ops.reserve(n_needed);
        dst.varying.reserve(n_needed);
        dst.memo.reserve(n_needed);
        let mut map = vec![Id(u32::MAX); self.ops.len()];
        // Uses of each node of `dst`, from the nodes of `self` it stands for.
        let mut dst_uses: Vec<usize> = Vec::new();
        for (i, &op) in self.ops.iter().enumerate() {
            if !need[i] {
                continue;
            }
            let new = dst.lower(op, |a| map[a.0 as usize], &dst_uses);
            map[i] = new;
            if dst_uses.len() <= new.0 as usize {
                dst_uses.resize(new.0 as usize + 1, 0);
            }
            dst_uses[new.0 as usize] += uses[i];
        }
        let out = outputs.iter().map(|o| map[o.0 as usize]).collect();
        (dst, out)
    }

    /// One node of [`Graph::lowered`]: `op` with its arguments mapped by `m`, by the rules
    /// there where one applies.
    fn lower(&mut self, op: Op, m: impl Fn(Id) -> Id, uses: &[usize]) -> Id {
        // A per-event product with no other use: its per-event factor, its other factor, and
        // whether that one is the same for every event.
        let product = |g: &Graph, id: Id| -> Option<(Id, Id, bool)> {
            match g.op(id) {
                Op::Mul(p, q) if g.varying(id) && uses.get(id.0 as usize) == Some(&1) => {
                    Some(if g.varying(p) {
                        (p, q, !g.varying(q))
                    } else {
                        (q, p, true)
                    })
                }
                _ => None,
            }
        };
        // A per-event node of no other use, with its operation.
        let single = |g: &Graph, id: Id| -> Option<Op> {
            (g.varying(id) && uses.get(id.0 as usize) == Some(&1)).then(|| g.op(id))
        };
        match op {
            Op::Exp(a) | Op::Log(a) => {
                let fused = |x, y, z| match op {
                    Op::Exp(_) => Op::ExpFma(x, y, z),
                    _ => Op::LogFma(x, y, z),
                };
                match single(self, m(a)) {
                    Some(Op::Fma(x, y, z)) => self.fold(fused(x, y, z)),
                    // A product: a multiply-add of 0, the per-event factor first.
                    Some(Op::Mul(x, y)) => {
                        let (x, y) = if self.varying(x) { (x, y) } else { (y, x) };
                        let zero = self.constant(0.0);
                        self.fold(fused(x, y, zero))
                    }
                    _ => self.rebuild(op, m),
                }
            }
            Op::Powi(a, 2) => {
                let scaled = match single(self, m(a)) {
                    Some(Op::Mul(p, q)) if !self.varying(q) => Some((p, q)),
                    Some(Op::Mul(q, p)) if !self.varying(q) => Some((p, q)),
                    _ => None,
                };
                match scaled.map(|(p, q)| (single(self, p), q)) {
                    Some((Some(Op::Sub(x, y)), u)) => self.fold(Op::ScaledSq(x, y, u)),
                    _ => self.rebuild(op, m),
                }
            }
            Op::Div(a, b) if self.varying(m(a)) && !self.varying(m(b)) => {
                let one = self.constant(1.0);
                let r = self.div(one, m(b));
                self.mul(m(a), r)
            }
            Op::Neg(a) => match product(self, m(a)) {
                Some((v, u, true)) => {
                    let nu = self.neg(u);
                    self.mul(v, nu)
                }
                _ => self.rebuild(op, m),
            },
            Op::Add(a, b) | Op::Sub(a, b) => {
                let (a, b) = (m(a), m(b));
                let minus = matches!(op, Op::Sub(..));
                if !self.varying(b) {
                    // x · y ± u
                    if let Some((x, y, _)) = product(self, a) {
                        let c = if minus { self.neg(b) } else { b };
                        return self.fma(x, y, c);
                    }
                } else if !self.varying(a) {
                    // u ± x · y, the sign onto the uniform factor.
                    if let Some((x, u, true)) = product(self, b) {
                        let y = if minus { self.neg(u) } else { u };
                        return self.fma(x, y, a);
                    }
                } else {
                    // Both per event (a mixture's sum of its terms): x · y + z, z ± x · u.
                    if let (false, Some((x, y, _))) = (minus, product(self, a)) {
                        return self.fma(x, y, b);
                    }
                    if let Some((x, u, true)) = product(self, b) {
                        let y = if minus { self.neg(u) } else { u };
                        return self.fma(x, y, a);
                    }
                }
                if minus {
                    self.sub(a, b)
                } else {
                    self.add(a, b)
                }
            }
            _ => self.rebuild(op, m),
        }
    }

    /// Every node `outputs` depend on, as a mask over the graph.
    pub fn reachable(&self, outputs: &[Id]) -> Vec<bool> {
        let mut need = vec![false; self.ops.len()];
        for o in outputs {
            need[o.0 as usize] = true;
        }
        for i in (0..self.ops.len()).rev() {
            if need[i] {
                for a in self.ops[i].args() {
                    need[a.0 as usize] = true;
                }
            }
        }
        need
    }

    /// The value of a node that does not depend on the events, at `params` (slow: for tests
    /// and one-off values; evaluators use [`crate::program`]).
    pub fn value(&self, id: Id, params: &[f64], columns: &[f64]) -> f64 {
        let mut vals = vec![0.0; id.0 as usize + 1];
        self.eval_prefix(params, columns, &mut vals);
        vals[id.0 as usize]
    }

    /// The nodes `id` depends on (itself included), in order: for [`Graph::value_of`].
    pub fn needed(&self, id: Id) -> Vec<u32> {
        let mask = self.reachable(&[id]);
        (0..=id.0).filter(|&i| mask[i as usize]).collect()
    }

    /// The value of the last of `needed` (from [`Graph::needed`]), evaluating only those nodes
    /// into `vals` (as long as the graph): one node's value at many points without the cost of
    /// the whole graph before it.
    pub fn value_of(
        &self,
        needed: &[u32],
        params: &[f64],
        columns: &[f64],
        vals: &mut [f64],
    ) -> f64 {
        for &i in needed {
            let i = i as usize;
            vals[i] = match self.ops[i] {
                Op::Param(p) => params[p],
                Op::Column(j) => columns.get(j).copied().unwrap_or(f64::NAN),
                op => eval_scalar(op, &|a| vals[a.0 as usize], &self.tables),
            };
        }
        needed.last().map_or(f64::NAN, |&i| vals[i as usize])
    }

    /// Every node's value at `params` and one event's `columns`, into `vals` (one a node):
    /// per-event values read from files (a TTree's selection, weight and observables).
    pub fn eval_all(&self, params: &[f64], columns: &[f64], vals: &mut [f64]) {
        self.eval_prefix(params, columns, &mut vals[..self.ops.len()]);
    }

    /// The first `vals.len()` nodes' values (a node's arguments come before it).
    fn eval_prefix(&self, params: &[f64], columns: &[f64], vals: &mut [f64]) {
        for i in 0..vals.len() {
            vals[i] = match self.ops[i] {
                Op::Param(p) => params[p],
                Op::Column(j) => columns.get(j).copied().unwrap_or(f64::NAN),
                op => eval_scalar(op, &|a| vals[a.0 as usize], &self.tables),
            };
        }
    }
}

/// One operation on scalar arguments (`arg` gives each argument's value).
#[inline(always)]
pub fn eval_scalar(op: Op, arg: &dyn Fn(Id) -> f64, tables: &[Table]) -> f64 {
    match op {
        Op::Const(c) => c,
        Op::Param(_) | Op::Column(_) => f64::NAN,
        Op::Add(a, b) => arg(a) + arg(b),
        Op::Sub(a, b) => arg(a) - arg(b),
        Op::Mul(a, b) => arg(a) * arg(b),
        Op::Div(a, b) => arg(a) / arg(b),
        Op::Pow(a, b) => arg(a).powf(arg(b)),
        Op::Powi(a, k) => arg(a).powi(k),
        Op::Neg(a) => -arg(a),
        Op::Exp(a) => arg(a).exp(),
        Op::Log(a) => arg(a).ln(),
        Op::Sqrt(a) => arg(a).sqrt(),
        Op::Abs(a) => arg(a).abs(),
        Op::Erf(a) => libm::erf(arg(a)),
        Op::Erfcx(a) => crate::faddeeva::erfcx(arg(a)),
        Op::Sin(a) => arg(a).sin(),
        Op::Cos(a) => arg(a).cos(),
        Op::Exprel(a) => exprel(arg(a)),
        Op::Lgamma(a) => libm::lgamma(arg(a)),
        Op::GammaP(a, y) => gamma_p(arg(a), arg(y)).0,
        Op::LandauLnPdf(a) => crate::landau::ln_pdf(arg(a)).0,
        Op::LandauCdf(a) => crate::landau::cdf(arg(a)),
        Op::LandauSf(a) => crate::landau::sf(arg(a)),
        Op::Hist(a, t) | Op::Spline(a, t) => tables[t as usize].at(arg(a)),
        Op::Select(c, a, b) => {
            if arg(c) >= 0.0 {
                arg(a)
            } else {
                arg(b)
            }
        }
        Op::Fma(a, b, c) => arg(a).mul_add(arg(b), arg(c)),
        Op::VoigtRe(a, b) => crate::faddeeva::faddeeva(arg(a), arg(b)).0,
        Op::ExpFma(a, b, c) => arg(a).mul_add(arg(b), arg(c)).exp(),
        Op::LogFma(a, b, c) => arg(a).mul_add(arg(b), arg(c)).ln(),
        Op::ScaledSq(a, b, c) => {
            let u = (arg(a) - arg(b)) * arg(c);
            u * u
        }
    }
}

/// The partial derivatives of an operation with value `v` in each of its arguments, in the
/// order of [`Op::args`] (a [`Op::Select`]'s condition gets 0).
#[inline(always)]
pub fn partials(op: Op, v: f64, arg: &dyn Fn(Id) -> f64, tables: &[Table]) -> [f64; 3] {
    match op {
        Op::Const(_) | Op::Param(_) | Op::Column(_) => [0.0; 3],
        Op::Add(..) => [1.0, 1.0, 0.0],
        Op::Sub(..) => [1.0, -1.0, 0.0],
        Op::Mul(a, b) => [arg(b), arg(a), 0.0],
        Op::Div(_, b) => {
            let y = arg(b);
            [1.0 / y, -v / y, 0.0]
        }
        Op::Pow(a, b) => {
            let (x, y) = (arg(a), arg(b));
            // x^y ln x → 0 as x → 0 (y > 0): 0 where the value is, not 0 · (−∞).
            [
                y * x.powf(y - 1.0),
                if v == 0.0 { 0.0 } else { v * x.ln() },
                0.0,
            ]
        }
        Op::Powi(a, k) => [k as f64 * arg(a).powi(k - 1), 0.0, 0.0],
        Op::Neg(_) => [-1.0, 0.0, 0.0],
        Op::Exp(_) => [v, 0.0, 0.0],
        Op::Log(a) => [1.0 / arg(a), 0.0, 0.0],
        Op::Sqrt(_) => [0.5 / v, 0.0, 0.0],
        Op::Abs(a) => [arg(a).signum(), 0.0, 0.0],
        Op::Erf(a) => {
            let x = arg(a);
            [TWO_OVER_SQRT_PI * (-x * x).exp(), 0.0, 0.0]
        }
        Op::Erfcx(a) => [crate::faddeeva::erfcx_prime(arg(a), v), 0.0, 0.0],
        Op::Sin(a) => [arg(a).cos(), 0.0, 0.0],
        Op::Cos(a) => [-arg(a).sin(), 0.0, 0.0],
        Op::Exprel(a) => [exprel_prime(arg(a)), 0.0, 0.0],
        Op::Lgamma(a) => [digamma(arg(a)), 0.0, 0.0],
        Op::GammaP(a, y) => {
            let (a, y) = (arg(a), arg(y));
            [gamma_p(a, y).1, gamma_p_dy(a, y), 0.0]
        }
        Op::LandauLnPdf(a) => [crate::landau::ln_pdf(arg(a)).1, 0.0, 0.0],
        Op::LandauCdf(a) => [crate::landau::pdf(arg(a)), 0.0, 0.0],
        Op::LandauSf(a) => [-crate::landau::pdf(arg(a)), 0.0, 0.0],
        Op::Hist(..) => [0.0; 3],
        Op::Spline(a, t) => [tables[t as usize].slope(arg(a)), 0.0, 0.0],
        Op::Select(c, ..) => {
            if arg(c) >= 0.0 {
                [0.0, 1.0, 0.0]
            } else {
                [0.0, 0.0, 1.0]
            }
        }
        Op::Fma(a, b, _) => [arg(b), arg(a), 1.0],
        Op::ExpFma(a, b, _) => [v * arg(b), v * arg(a), v],
        Op::LogFma(a, b, c) => {
            let r = 1.0 / arg(a).mul_add(arg(b), arg(c));
            [arg(b) * r, arg(a) * r, r]
        }
        Op::ScaledSq(a, b, c) => {
            let (d, s) = (arg(a) - arg(b), arg(c));
            let u = d * s;
            [2.0 * u * s, -2.0 * u * s, 2.0 * u * d]
        }
        Op::VoigtRe(a, b) => {
            let (_, dx, dy) = crate::faddeeva::re_and_partials(arg(a), arg(b));
            [dx, dy, 0.0]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_nodes_are_shared_and_constants_folded() {
        let mut g = Graph::new();
        let x = g.column(0);
        let m = g.param(0);
        let a = g.sub(x, m);
        let b = g.sub(x, m);
        assert_eq!(a, b);
        let two = g.constant(2.0);
        let three = g.constant(3.0);
        let five = g.add(two, three);
        assert_eq!(g.constant_of(five), Some(5.0));
        assert!(g.varying(a) && !g.varying(m) && !g.varying(five));
        let e = g.exp(m);
        assert_eq!(g.log(e), m);
    }

    /// P(a, y) against closed forms — P(1, y) = 1 − e^(−y), P(1/2, y) = erf(√y), P(2, y) =
    /// 1 − (1 + y) e^(−y) — over eleven decades of y; ∂P/∂y against the closed forms' derivatives,
    /// ∂P/∂a against mpmath.
    #[test]
    fn incomplete_gamma_and_its_derivatives() {
        for y in [
            1e-8_f64, 1e-3, 0.3, 1.0, 2.5, 9.0, 40.0, 300.0, 700.0, 760.0, 1e4,
        ] {
            let e = (-y).exp();
            for (a, exact) in [
                (1.0, -(-y).exp_m1()),
                (0.5, libm::erf(y.sqrt())),
                (2.0, 1.0 - (1.0 + y) * e),
            ] {
                if a == 2.0 && y < 0.3 {
                    continue; // (the closed form cancels there)
                }
                let (p, _) = gamma_p(a, y);
                // (The largest term is an exponential of about y: its rounding grows with y.)
                assert!(
                    (p - exact).abs() <= 3e-15 * (4.0 + y) * exact,
                    "P({a}, {y}) = {p} against {exact}"
                );
                let dy = gamma_p_dy(a, y);
                let exact_dy = match a {
                    1.0 => e,
                    2.0 => y * e,
                    _ => e / (std::f64::consts::PI * y).sqrt(),
                };
                assert!((dy - exact_dy).abs() <= 1e-13 * exact_dy, "∂P/∂y({a}, {y})");
            }
        }
        // ∂P/∂a by mpmath (40 digits, `diff` of `gammainc(a, 0, y, regularized=True)`); the
        // series of mixed signs leaves an absolute error of a few ε.
        let da = [
            (0.125, 1e-8, -1.914_768_022_242_152_6),
            (0.125, 0.3, -0.921_473_699_744_841_3),
            (0.125, 2.5, -0.036_599_909_813_617_264),
            (0.125, 9.0, -2.349_390_403_260_394_3e-5),
            (0.5, 1e-8, -0.002_082_668_685_723_133),
            (0.5, 2.5, -0.079_975_877_305_173_84),
            (1.7, 0.3, -0.141_829_104_524_334_2),
            (1.7, 9.0, -0.001_425_260_343_841_059_6),
            (12.0, 2.5, -2.049_857_127_271_89e-5),
            (12.0, 9.0, -0.084_900_245_586_272_62),
            (12.0, 40.0, -7.780_877_198_335_359e-8),
            (0.5, 40.0, -2.125_341_565_699_528_7e-18),
        ];
        for (a, y, exact) in da {
            let d = gamma_p(a, y).1;
            assert!(
                (d - exact).abs() <= 1e-10 * exact.abs() + 1e-15,
                "∂P/∂a({a}, {y}) = {d} against {exact}"
            );
        }
        assert_eq!(gamma_p(0.5, 0.0), (0.0, 0.0));
        assert_eq!(gamma_p(0.5, f64::INFINITY), (1.0, 0.0));
        assert!(gamma_p(-1.0, 1.0).0.is_nan() && gamma_p(1.0, f64::NAN).0.is_nan());
        // Hostile arguments end (a fuzzed β = 0 made a = ∞ and an endless NaN sum).
        assert!(gamma_p(f64::INFINITY, 1.0).0.is_nan());
        assert!(gamma_p(1e14, 1e14).0.is_nan());
        assert!(gamma_p(1e16, 1e16).0.is_nan());
        assert_eq!((gamma_p_dy(1.0, 0.0), gamma_p_dy(2.0, 0.0)), (1.0, 0.0));
        assert_eq!(gamma_p_dy(0.5, 0.0), f64::INFINITY);
    }

    /// exprel′ against the closed form where it does not cancel, and against a difference
    /// quotient of exprel computed in higher precision by its own series near 0.
    /// ψ against values known in closed form: ψ(1) = −γ, ψ(1/2) = −γ − 2 ln 2, ψ(n + 1) =
    /// H_n − γ; and against differences of ln Γ.
    #[test]
    fn digamma_is_the_derivative_of_lgamma() {
        let gamma = 0.577_215_664_901_532_9;
        assert!((digamma(1.0) + gamma).abs() < 1e-15);
        assert!((digamma(0.5) + gamma + 2.0 * std::f64::consts::LN_2).abs() < 1e-14);
        let h10: f64 = (1..=10).map(|k| 1.0 / k as f64).sum();
        assert!((digamma(11.0) - (h10 - gamma)).abs() < 1e-14);
        for x in [0.3, 2.7, 9.99, 10.0, 55.5, 1400.0] {
            let h = 1e-5 * x;
            let fd = (libm::lgamma(x + h) - libm::lgamma(x - h)) / (2.0 * h);
            assert!((digamma(x) - fd).abs() < 1e-7 * fd.abs().max(1.0), "ψ({x})");
        }
        assert!(digamma(0.0).is_nan() && digamma(-1.0).is_nan());
        // Below 0, the derivative of ln |Γ|: ψ(−1/2) = 2 − γ − 2 ln 2.
        assert!((digamma(-0.5) - (2.0 - gamma - 2.0 * std::f64::consts::LN_2)).abs() < 1e-13);
        for x in [-0.3, -2.7, -7.5] {
            let h = 1e-6;
            let fd = (libm::lgamma(x + h) - libm::lgamma(x - h)) / (2.0 * h);
            assert!((digamma(x) - fd).abs() < 1e-6 * fd.abs().max(1.0), "ψ({x})");
        }
    }

    /// A table's bins by the uniform formula and by search agree at and around every edge;
    /// outside, and NaN, give 0.
    #[test]
    fn tables_find_their_bins() {
        let uniform = Table::new(
            vec![0.0, 0.1, 0.2, 0.30000000000000004],
            vec![1.0, 2.0, 3.0],
        );
        assert!(uniform.uniform.is_some());
        let variable = Table::new(vec![0.0, 0.1, 0.25, 0.3], vec![1.0, 2.0, 3.0]);
        assert!(variable.uniform.is_none());
        for t in [&uniform, &variable] {
            for (b, w) in t.edges.windows(2).enumerate() {
                assert_eq!(t.at(w[0]), t.values[b]);
                assert_eq!(t.at(0.5 * (w[0] + w[1])), t.values[b]);
                assert_eq!(t.at(f64::from_bits(w[1].to_bits() - 1)), t.values[b]);
            }
            assert_eq!(t.at(t.edges[3]), 3.0, "the last edge is in the last bin");
            for x in [-1e-300, -1.0, 0.31, f64::NAN, f64::INFINITY] {
                assert_eq!(t.at(x), 0.0, "{x}");
            }
        }
    }

    #[test]
    fn exprel_prime_is_accurate_near_zero() {
        for t in [0.5f64, 0.49, 0.3, -0.3, 0.7, -2.0] {
            let closed = ((-t).exp() * (1.0 + t) - 1.0) / (t * t);
            assert!((exprel_prime(t) - closed).abs() < 1e-14, "t {t}");
        }
        // Near 0: the first terms of the series by hand.
        for t in [1e-3f64, 1e-2, -1e-2, 1e-4] {
            let series = -0.5 + t / 3.0 - t * t / 8.0 + t.powi(3) / 30.0 - t.powi(4) / 144.0;
            assert!((exprel_prime(t) - series).abs() < 1e-12, "t {t}");
        }
    }

    #[test]
    fn exprel_is_smooth_through_zero() {
        for t in [-1e-3, -1e-6, 0.0, 1e-6, 1e-3, 0.5, 30.0] {
            let h = 1e-6;
            let fd = (exprel(t + h) - exprel(t - h)) / (2.0 * h);
            assert!(
                (fd - exprel_prime(t)).abs() < 1e-7,
                "t {t}: {fd} {}",
                exprel_prime(t)
            );
        }
        assert_eq!(exprel(0.0), 1.0);
        assert!((exprel(1.0) - (1.0 - (-1.0f64).exp())).abs() < 1e-15);
    }
}
