//! Each PDF, defined once: its normalised log-density over a box domain as nodes of the
//! [`Graph`] — the shape, and the normalisation integral in closed form where one exists (erf
//! for Gaussians, exponentials, Crystal Ball tails, polynomial, Chebyshev and Bernstein bases),
//! else by Gauss–Legendre quadrature of the same shape over the domain ([`quadrature`]) — so
//! that the value, the gradient in every parameter (reverse-mode over the graph, never finite
//! differences) and every evaluator derive from these functions alone.
//!
//! Conventions are ROOT's and HS3's where they agree; where they differ, the function says which
//! it follows (the HS3 reader maps both onto these).

use crate::graph::{Graph, Id};

/// √(π/2).
const SQRT_PI_2: f64 = 1.253_314_137_315_500_3;

/// A closed interval of one observable: the PDF's normalisation range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Domain {
    pub lo: f64,
    pub hi: f64,
}

impl Domain {
    pub fn width(&self) -> f64 {
        self.hi - self.lo
    }
}

/// ln of a normalised density from the log of its shape and the log of its integral.
fn normalised(g: &mut Graph, log_shape: Id, log_norm: Id) -> Id {
    g.sub(log_shape, log_norm)
}

/// ∫_a^b e^(−t²/2) dt = √(π/2) (erf(b/√2) − erf(a/√2)).
fn gauss_integral(g: &mut Graph, a: Id, b: Id) -> Id {
    let r = std::f64::consts::FRAC_1_SQRT_2;
    let (sa, sb) = (g.scale(a, r), g.scale(b, r));
    let (ea, eb) = (g.erf(sa), g.erf(sb));
    let d = g.sub(eb, ea);
    g.scale(d, SQRT_PI_2)
}

/// ∫_a^b e^(−((x − μ)/σ)²/2) dx = σ ∫ over z of e^(−z²/2).
fn gauss_mass(g: &mut Graph, a: Id, b: Id, mu: Id, sigma: Id) -> Id {
    let (da, db) = (g.sub(a, mu), g.sub(b, mu));
    let (za, zb) = (g.div(da, sigma), g.div(db, sigma));
    let i = gauss_integral(g, za, zb);
    g.mul(i, sigma)
}

/// Gaussian N(x | μ, σ) over the domain.
pub fn gaussian(g: &mut Graph, x: Id, mu: Id, sigma: Id, dom: Domain) -> Id {
    let d = g.sub(x, mu);
    let z = g.div(d, sigma);
    let z2 = g.powi(z, 2);
    let log_shape = g.scale(z2, -0.5);
    let (lo, hi) = (g.constant(dom.lo), g.constant(dom.hi));
    let n = gauss_mass(g, lo, hi, mu, sigma);
    let log_norm = g.log(n);
    normalised(g, log_shape, log_norm)
}

/// Bifurcated Gaussian (RooBifurGauss): width σ_L below μ and σ_R above.
pub fn bifurcated_gaussian(
    g: &mut Graph,
    x: Id,
    mu: Id,
    sigma_l: Id,
    sigma_r: Id,
    dom: Domain,
) -> Id {
    let d = g.sub(x, mu);
    let sigma = g.select(d, sigma_r, sigma_l);
    let z = g.div(d, sigma);
    let z2 = g.powi(z, 2);
    let log_shape = g.scale(z2, -0.5);
    // Each side's part of the domain, in its own units (empty parts integrate to 0).
    let (lo, hi) = (g.constant(dom.lo), g.constant(dom.hi));
    let zero = g.constant(0.0);
    let left_hi = g.min(hi, mu);
    let right_lo = g.max(lo, mu);
    let side = |g: &mut Graph, a: Id, b: Id, s: Id| {
        let part = gauss_mass(g, a, b, mu, s);
        let width = g.sub(b, a);
        g.select(width, part, zero)
    };
    let left = side(g, lo, left_hi, sigma_l);
    let right = side(g, right_lo, hi, sigma_r);
    let n = g.add(left, right);
    let log_norm = g.log(n);
    normalised(g, log_shape, log_norm)
}

/// The log of the Voigt profile's shape at x (histfit's extension `histfit_voigtian_dist`, as
/// RooVoigtian): a Breit–Wigner of full width `width` convolved with a Gaussian of width
/// `sigma`, Re w(u + ia) with u = (x − μ)/(|σ|√2) and a = (|width|/2)/(|σ|√2), w the Faddeeva
/// function. Its integral has no closed form: the caller normalises it by quadrature.
pub fn voigtian_log_shape(g: &mut Graph, x: Id, mu: Id, width: Id, sigma: Id) -> Id {
    // As RooVoigtian, the widths' magnitudes: a width of 0 is the Gaussian.
    let (width, sigma) = (g.abs(width), g.abs(sigma));
    let s2 = g.scale(sigma, std::f64::consts::SQRT_2);
    let d = g.sub(x, mu);
    let u = g.div(d, s2);
    let hw = g.scale(width, 0.5);
    let a = g.div(hw, s2);
    let re = g.voigt_re(u, a);
    g.log(re)
}

/// The same at one point, from the parameters' values.
pub fn voigtian_log_shape_at(x: f64, mu: f64, width: f64, sigma: f64) -> f64 {
    let s2 = sigma.abs() * std::f64::consts::SQRT_2;
    crate::faddeeva::faddeeva((x - mu) / s2, 0.5 * width.abs() / s2)
        .0
        .ln()
}

/// HS3's exponential e^(−c·x) (ROOT's RooExponential is e^(c·x): its exporter writes −c).
pub fn exponential(g: &mut Graph, x: Id, c: Id, dom: Domain) -> Id {
    let cx = g.mul(c, x);
    let log_shape = g.neg(cx);
    // ∫ e^(−cx) = e^(−c·lo) (hi − lo) exprel(c (hi − lo)), exact through c = 0.
    let cw = g.scale(c, dom.width());
    let rel = g.exprel(cw);
    let lrel = g.log(rel);
    let clo = g.scale(c, -dom.lo);
    let w = g.constant(dom.width().ln());
    let t = g.add(clo, w);
    let log_norm = g.add(t, lrel);
    normalised(g, log_shape, log_norm)
}

/// HS3's generalised normal e^(−(|x − μ|/α)^β) (β = 2: a Gaussian of σ = α/√2; β ≈ 8: a
/// flat top with steep sides, HS3's suggestion for a constraint between two models).
/// Normalised in closed form: ∫_μ^(μ+t) e^(−(u/α)^β) du = (α/β) Γ(1/β) P(1/β, (t/α)^β), P the
/// regularised incomplete gamma function — so β may be fitted too. An infinite end of the
/// domain contributes the whole tail.
pub fn generalized_normal(g: &mut Graph, x: Id, mu: Id, alpha: Id, beta: Id, dom: Domain) -> Id {
    let d = g.sub(x, mu);
    let ad = g.abs(d);
    let u = g.div(ad, alpha);
    let ub = g.pow(u, beta);
    let log_shape = g.neg(ub);
    let one = g.constant(1.0);
    let a = g.div(one, beta);
    // sign(t) P(1/β, (|t|/α)^β) at each end t = bound − μ.
    let side = |g: &mut Graph, bound: f64| -> Id {
        if bound.is_infinite() {
            return g.constant(bound.signum());
        }
        let b = g.constant(bound);
        let t = g.sub(b, mu);
        let at = g.abs(t);
        let ut = g.div(at, alpha);
        let y = g.pow(ut, beta);
        let p = g.gamma_p(a, y);
        let minus = g.neg(p);
        g.select(t, p, minus)
    };
    let hi = side(g, dom.hi);
    let lo = side(g, dom.lo);
    let mass = g.sub(hi, lo);
    // ln N = ln α − ln β + ln Γ(1/β) + ln(mass).
    let (la, lb) = (g.log(alpha), g.log(beta));
    let lg = g.lgamma(a);
    let lm = g.log(mass);
    let t1 = g.sub(la, lb);
    let t2 = g.add(t1, lg);
    let log_norm = g.add(t2, lm);
    normalised(g, log_shape, log_norm)
}

/// Landau φ((x − μ)/σ)/σ (RooLandau; φ as ROOT's `landau_pdf`, [`crate::landau`]), normalised
/// over the domain by its distribution function: Φ(b) − Φ(a), or Q(a) − Q(b) where the whole
/// domain lies above the peak's region (λ ≥ 0 at its low end), where Φ's difference would cancel.
pub fn landau(g: &mut Graph, x: Id, mu: Id, sigma: Id, dom: Domain) -> Id {
    let d = g.sub(x, mu);
    let l = g.div(d, sigma);
    let ln_phi = g.landau_ln_pdf(l);
    let at = |g: &mut Graph, bound: f64| {
        let b = g.constant(bound);
        let t = g.sub(b, mu);
        g.div(t, sigma)
    };
    let (a, b) = (at(g, dom.lo), at(g, dom.hi));
    let (pa, pb) = (g.landau_cdf(a), g.landau_cdf(b));
    let (qa, qb) = (g.landau_sf(a), g.landau_sf(b));
    let below = g.sub(pb, pa);
    let above = g.sub(qa, qb);
    let mass = g.select(a, above, below);
    let ln_sigma = g.log(sigma);
    let ln_mass = g.log(mass);
    let log_norm = g.add(ln_sigma, ln_mass);
    normalised(g, ln_phi, log_norm)
}

/// Uniform over the domain.
pub fn uniform(g: &mut Graph, dom: Domain) -> Id {
    g.constant(-dom.width().ln())
}

/// Polynomial Σ_k a_k x^k (HS3 `polynomial_dist`, coefficients from order 0).
pub fn polynomial(g: &mut Graph, x: Id, coefficients: &[Id], dom: Domain) -> Id {
    let mut terms = Vec::new();
    let mut ints = Vec::new();
    for (k, &a) in coefficients.iter().enumerate() {
        let xk = g.powi(x, k as i32);
        terms.push(g.mul(a, xk));
        let k1 = (k + 1) as i32;
        let span = (dom.hi.powi(k1) - dom.lo.powi(k1)) / k1 as f64;
        ints.push(g.scale(a, span));
    }
    let shape = g.sum(&terms);
    let n = g.sum(&ints);
    let (ls, ln) = (g.log(shape), g.log(n));
    normalised(g, ls, ln)
}

/// The domain mapped onto [−1, 1].
fn to_unit_interval(g: &mut Graph, x: Id, dom: Domain) -> Id {
    let mid = g.constant(0.5 * (dom.lo + dom.hi));
    let d = g.sub(x, mid);
    g.scale(d, 2.0 / dom.width())
}

/// Chebyshev series 1 + Σ_{k≥1} c_k T_k(x′) (RooChebychev), x′ the domain mapped onto [−1, 1].
pub fn chebychev(g: &mut Graph, x: Id, coefficients: &[Id], dom: Domain) -> Id {
    let u = to_unit_interval(g, x, dom);
    let one = g.constant(1.0);
    // T_0 = 1, T_1 = u, T_{k+1} = 2u T_k − T_{k−1}.
    let (mut t_prev, mut t) = (one, u);
    let mut terms = vec![one];
    let mut ints = vec![g.constant(2.0)];
    for (k, &c) in coefficients.iter().enumerate() {
        let order = k + 1;
        if order > 1 {
            let two_u = g.scale(u, 2.0);
            let p = g.mul(two_u, t);
            let next = g.sub(p, t_prev);
            t_prev = t;
            t = next;
        }
        terms.push(g.mul(c, t));
        if order % 2 == 0 {
            // ∫_{−1}^{1} T_k = 2 / (1 − k²) for even k, 0 for odd k.
            ints.push(g.scale(c, 2.0 / (1.0 - (order * order) as f64)));
        }
    }
    let shape = g.sum(&terms);
    let i = g.sum(&ints);
    let n = g.scale(i, 0.5 * dom.width());
    let (ls, ln) = (g.log(shape), g.log(n));
    normalised(g, ls, ln)
}

/// Bernstein polynomial Σ_k c_k b_{k,n}(x′) (RooBernstein), x′ the domain mapped onto [0, 1].
pub fn bernstein(g: &mut Graph, x: Id, coefficients: &[Id], dom: Domain) -> Id {
    let n = coefficients.len().saturating_sub(1);
    let lo = g.constant(dom.lo);
    let d = g.sub(x, lo);
    let u = g.scale(d, 1.0 / dom.width());
    let one = g.constant(1.0);
    let v = g.sub(one, u);
    let mut terms = Vec::new();
    for (k, &c) in coefficients.iter().enumerate() {
        let binom = (0..k).fold(1.0, |b, j| b * (n - j) as f64 / (j + 1) as f64);
        let uk = g.powi(u, k as i32);
        let vk = g.powi(v, (n - k) as i32);
        let b = g.mul(uk, vk);
        let cb = g.mul(c, b);
        terms.push(g.scale(cb, binom));
    }
    let shape = g.sum(&terms);
    // ∫_0^1 b_{k,n} = 1/(n+1).
    let total = g.sum(coefficients);
    let norm = g.scale(total, dom.width() / (n + 1) as f64);
    let (ls, ln) = (g.log(shape), g.log(norm));
    normalised(g, ls, ln)
}

/// ln of the one-sided Crystal Ball shape in t with its power-law tail below −α (α > 0):
/// −t²/2 in the core, n ln(n/α) − α²/2 − n ln(n/α − α − t) in the tail.
fn cb_log_shape(g: &mut Graph, t: Id, alpha: Id, n: Id) -> Id {
    let t2 = g.powi(t, 2);
    let core = g.scale(t2, -0.5);
    let n_over_a = g.div(n, alpha);
    let b = g.sub(n_over_a, alpha);
    let bt = g.sub(b, t);
    let lbt = g.log(bt);
    let lna = g.log(n_over_a);
    let a2 = g.powi(alpha, 2);
    let ha2 = g.scale(a2, 0.5);
    let diff = g.sub(lna, lbt);
    let nd = g.mul(n, diff);
    let tail = g.sub(nd, ha2);
    let c = g.add(t, alpha);
    g.select(c, core, tail)
}

/// ∫_{t1}^{t2} of the one-sided Crystal Ball shape of [`cb_log_shape`] (t1 ≤ t2).
fn cb_integral(g: &mut Graph, t1: Id, t2: Id, alpha: Id, n: Id) -> Id {
    let zero = g.constant(0.0);
    let minus_a = g.neg(alpha);
    // Tail part [t1, min(t2, −α)].
    let tail_hi = g.min(t2, minus_a);
    let n_over_a = g.div(n, alpha);
    let b = g.sub(n_over_a, alpha);
    let lna = g.log(n_over_a);
    let a2 = g.powi(alpha, 2);
    let ha2 = g.scale(a2, 0.5);
    let na = g.mul(n, lna);
    let log_a = g.sub(na, ha2);
    let amp = g.exp(log_a);
    // ∫_{t1}^{t2} (B − t)^(−n) dt = (u1^m − u2^m)/m with u = B − t, m = 1 − n, written as
    // u1^m · D · exprel(m D), D = ln(u1/u2): smooth through n = 1 (where it is D), in value and
    // in every derivative.
    let (b1, b2) = (g.sub(b, t1), g.sub(b, tail_hi));
    let (l1, l2) = (g.log(b1), g.log(b2));
    let one = g.constant(1.0);
    let m = g.sub(one, n);
    let dl = g.sub(l1, l2);
    let ml1 = g.mul(m, l1);
    let lead = g.exp(ml1);
    let md = g.mul(m, dl);
    let rel = g.exprel(md);
    let shape = g.mul(dl, rel);
    let tail_int = g.mul(lead, shape);
    let tail_scaled = g.mul(amp, tail_int);
    let tail_width = g.sub(tail_hi, t1);
    let tail = g.select(tail_width, tail_scaled, zero);
    // Core part [max(t1, −α), t2].
    let core_lo = g.max(t1, minus_a);
    let core_int = gauss_integral(g, core_lo, t2);
    let core_width = g.sub(t2, core_lo);
    let core = g.select(core_width, core_int, zero);
    g.add(tail, core)
}

/// One side of a two-sided Crystal Ball's integral: the one-sided shape over the offsets
/// `(a, b)` from x0 (in its mirrored orientation) in units of σ, times σ; 0 where the side's part
/// `part` of the domain is empty.
fn cb_side(g: &mut Graph, (a, b): (Id, Id), part: (Id, Id), sigma: Id, alpha: Id, n: Id) -> Id {
    let (ta, tb) = (g.div(a, sigma), g.div(b, sigma));
    let i = cb_integral(g, ta, tb, alpha, n);
    let i = g.mul(i, sigma);
    let width = g.sub(part.1, part.0);
    let zero = g.constant(0.0);
    g.select(width, i, zero)
}

/// Crystal Ball (RooCBShape): Gaussian core N(m0, σ), power-law tail of order n beyond α σ —
/// below the peak for α > 0, above it for α < 0.
pub fn crystal_ball(g: &mut Graph, x: Id, m0: Id, sigma: Id, alpha: Id, n: Id, dom: Domain) -> Id {
    // For α < 0 the shape is mirrored: t → −t with |α|.
    let one = g.constant(1.0);
    let minus_one = g.constant(-1.0);
    let s = g.select(alpha, one, minus_one);
    let abs_a = g.abs(alpha);
    let d = g.sub(x, m0);
    // t = d · (±1/σ): the sign folded into the once-per-point factor — the same bits as the
    // (d · ±1) · (1/σ) that lowering made of (d · ±1)/σ, with one per-event multiplication
    // fewer.
    let k = g.div(s, sigma);
    let t = g.mul(d, k);
    let log_shape = cb_log_shape(g, t, abs_a, n);
    let (lo, hi) = (g.constant(dom.lo), g.constant(dom.hi));
    let (dl, dh) = (g.sub(lo, m0), g.sub(hi, m0));
    let (tl, th) = (g.mul(dl, s), g.mul(dh, s));
    let (tl, th) = (g.div(tl, sigma), g.div(th, sigma));
    let (t1, t2) = (g.min(tl, th), g.max(tl, th));
    let i = cb_integral(g, t1, t2, abs_a, n);
    let norm = g.mul(i, sigma);
    let log_norm = g.log(norm);
    normalised(g, log_shape, log_norm)
}

/// Double-sided Crystal Ball (ROOT 6's RooCrystalBall): Gaussian core with widths σ_L below x0
/// and σ_R above, power-law tails of orders n_L, n_R beyond α_L σ_L below and α_R σ_R above.
#[allow(clippy::too_many_arguments)]
pub fn crystal_ball_double(
    g: &mut Graph,
    x: Id,
    x0: Id,
    sigma_l: Id,
    sigma_r: Id,
    alpha_l: Id,
    n_l: Id,
    alpha_r: Id,
    n_r: Id,
    dom: Domain,
) -> Id {
    // Each side as a one-sided shape with its tail on the left: the right side mirrored.
    let d = g.sub(x, x0);
    let sigma = g.select(d, sigma_r, sigma_l);
    let t = g.div(d, sigma);
    let minus_t = g.neg(t);
    let u = g.select(d, minus_t, t);
    let alpha = g.select(d, alpha_r, alpha_l);
    let n = g.select(d, n_r, n_l);
    let log_shape = cb_log_shape(g, u, alpha, n);
    let (lo, hi) = (g.constant(dom.lo), g.constant(dom.hi));
    // Left part [lo, min(hi, x0)] in t = (x − x0)/σ_L; right part [max(lo, x0), hi] mirrored,
    // u = −(x − x0)/σ_R, so that its tail is on the left too.
    let left_hi = g.min(hi, x0);
    let (a, b) = (g.sub(lo, x0), g.sub(left_hi, x0));
    let left = cb_side(g, (a, b), (lo, left_hi), sigma_l, alpha_l, n_l);
    let right_lo = g.max(lo, x0);
    let (a, b) = (g.sub(x0, hi), g.sub(x0, right_lo));
    let right = cb_side(g, (a, b), (right_lo, hi), sigma_r, alpha_r, n_r);
    let norm = g.add(left, right);
    let log_norm = g.log(norm);
    normalised(g, log_shape, log_norm)
}

/// Log-normal (HS3 `lognormal_dist`, RooLognormal's μ = ln m0, σ = ln k):
/// f(x) ∝ exp(−(ln x − μ)²/(2σ²)) / x.
pub fn lognormal(g: &mut Graph, x: Id, mu: Id, sigma: Id, dom: Domain) -> Id {
    let lx = g.log(x);
    let d = g.sub(lx, mu);
    let z = g.div(d, sigma);
    let z2 = g.powi(z, 2);
    let h = g.scale(z2, -0.5);
    let log_shape = g.sub(h, lx);
    // ∫ = σ √(π/2) (erf(z_hi/√2) − erf(z_lo/√2)) in z = (ln x − μ)/σ.
    let (llo, lhi) = (g.constant(dom.lo.ln()), g.constant(dom.hi.ln()));
    let n = gauss_mass(g, llo, lhi, mu, sigma);
    let log_norm = g.log(n);
    normalised(g, log_shape, log_norm)
}

/// Gamma distribution (RooGamma, TMath's `GammaDist`): (x − μ)^(γ−1) e^(−(x − μ)/β) /
/// (Γ(γ) β^γ) above μ, 0 below it (at μ: 1/(Γ(1) β) for γ = 1, else 0, as TMath). Normalised over the domain in closed form by the
/// regularised incomplete gamma function P(γ, (bound − μ)/β) at its ends, an end at or below μ
/// holding no mass (so γ, β and μ may all be fitted). Where the whole domain lies far in the
/// tail the two P are both near 1 and their difference loses digits.
pub fn gamma(g: &mut Graph, x: Id, shape: Id, scale: Id, mu: Id, dom: Domain) -> Id {
    let d = g.sub(x, mu);
    let ld = g.log(d);
    let one = g.constant(1.0);
    let gm1 = g.sub(shape, one);
    let power = g.mul(gm1, ld);
    let r = g.div(d, scale);
    let above = g.sub(power, r);
    // 0 below μ (where ln(x − μ) is not defined); at μ itself, as TMath's GammaDist: 1/β (the
    // shape's 1) for γ = 1, 0 otherwise (where (γ − 1) ln 0 would be NaN or +∞).
    let outside = g.constant(f64::NEG_INFINITY);
    let zero = g.constant(0.0);
    let off_one = g.abs(gm1);
    let not_one = g.neg(off_one);
    let at_mu = g.select(not_one, zero, outside);
    let at_or_below = g.select(d, at_mu, outside);
    let below_or_at = g.neg(d);
    let log_shape = g.select(below_or_at, at_or_below, above);
    let p_at = |g: &mut Graph, bound: f64| -> Id {
        if bound == f64::INFINITY {
            return one;
        }
        let b = g.constant(bound);
        let t = g.sub(b, mu);
        let y = g.div(t, scale);
        let p = g.gamma_p(shape, y);
        // 0 where the end is at or below μ — taken at t = 0 too, where P's derivative in y
        // is infinite for γ < 1 (and y's in the parameters 0).
        let below = g.neg(t);
        g.select(below, zero, p)
    };
    let (p_hi, p_lo) = (p_at(g, dom.hi), p_at(g, dom.lo));
    let mass = g.sub(p_hi, p_lo);
    // ln N = ln Γ(γ) + γ ln β + ln(P_hi − P_lo).
    let lg = g.lgamma(shape);
    let lb = g.log(scale);
    let gl = g.mul(shape, lb);
    let lm = g.log(mass);
    let t = g.add(lg, gl);
    let log_norm = g.add(t, lm);
    normalised(g, log_shape, log_norm)
}

/// Σ_i c_i x^(e_i) (RooPowerSum) over a domain above 0, normalised in closed form: ∫ x^e over
/// [lo, hi] = (hi^m − lo^m)/m with m = e + 1, written hi^m · D · exprel(m D) for m ≥ 0 and
/// lo^m · D · exprel(−m D) below, D = ln(hi/lo) (exprel(t) = (1 − e^(−t))/t: each form's
/// exponential decays, where the other's would overflow for |m| D beyond 709) — smooth through
/// e = −1 (where it is D), in value and in every derivative, so that exponents may be fitted
/// too.
pub fn power_sum(g: &mut Graph, x: Id, coefficients: &[Id], exponents: &[Id], dom: Domain) -> Id {
    debug_assert!(dom.lo > 0.0 && coefficients.len() == exponents.len());
    let (ln_lo, ln_hi) = (g.constant(dom.lo.ln()), g.constant(dom.hi.ln()));
    let span = (dom.hi / dom.lo).ln();
    let one = g.constant(1.0);
    let mut terms = Vec::new();
    let mut ints = Vec::new();
    for (&c, &e) in coefficients.iter().zip(exponents) {
        let xe = g.pow(x, e);
        terms.push(g.mul(c, xe));
        let m = g.add(e, one);
        let form = |g: &mut Graph, ln_end: Id, sign: f64| {
            let ml = g.mul(m, ln_end);
            let lead = g.exp(ml);
            let md = g.scale(m, sign * span);
            let rel = g.exprel(md);
            g.mul(lead, rel)
        };
        let (rising, falling) = (form(g, ln_hi, 1.0), form(g, ln_lo, -1.0));
        let i = g.select(m, rising, falling);
        let i = g.scale(i, span);
        ints.push(g.mul(c, i));
    }
    let shape = g.sum(&terms);
    let n = g.sum(&ints);
    let (ls, ln) = (g.log(shape), g.log(n));
    normalised(g, ls, ln)
}

/// The log of RooLegacyExpPoly's shape, exp(Σ_k c_k x^k) (coefficients from order 0, as ROOT's
/// exporter writes them: "1.0" and "0.0" below the class's lowest order): the polynomial itself.
pub fn exp_poly_log_shape(g: &mut Graph, x: Id, coefficients: &[Id]) -> Id {
    let terms: Vec<Id> = coefficients
        .iter()
        .enumerate()
        .map(|(k, &c)| {
            let xk = g.powi(x, k as i32);
            g.mul(c, xk)
        })
        .collect();
    g.sum(&terms)
}

/// exp(c_0 + c_1 x) normalised in closed form (an [`exp_poly_log_shape`] of degree 1 at most:
/// higher degrees have none, and are normalised by quadrature): HS3's exponential of −c_1, c_0
/// a constant factor the normalisation takes out.
pub fn exp_linear(g: &mut Graph, x: Id, coefficients: &[Id], dom: Domain) -> Id {
    debug_assert!(coefficients.len() <= 2);
    match coefficients.get(1) {
        Some(&c1) => {
            let c = g.neg(c1);
            exponential(g, x, c, dom)
        }
        None => uniform(g, dom),
    }
}

/// The most graph nodes a quadrature builds (about 1 ms of each evaluation's uniform part).
pub const QUADRATURE_NODES: usize = 1 << 18;

/// Gauss–Legendre nodes and weights on [−1, 1], 8 points.
#[allow(clippy::excessive_precision)]
pub(crate) const GL8: [(f64, f64); 8] = [
    (-0.960_289_856_497_536_3, 0.101_228_536_290_376_26),
    (-0.796_666_477_413_626_7, 0.222_381_034_453_374_47),
    (-0.525_532_409_916_329_0, 0.313_706_645_877_887_3),
    (-0.183_434_642_495_649_8, 0.362_683_783_378_362_0),
    (0.183_434_642_495_649_8, 0.362_683_783_378_362_0),
    (0.525_532_409_916_329_0, 0.313_706_645_877_887_3),
    (0.796_666_477_413_626_7, 0.222_381_034_453_374_47),
    (0.960_289_856_497_536_3, 0.101_228_536_290_376_26),
];

/// The nodes and weights of composite 8-point Gauss–Legendre quadrature over the domain, cut at
/// `onsets` (points inside it where the shape starts to grow as a power of √(x − onset): a
/// channel's threshold) into segments of `pieces` equal subintervals each. A segment that begins
/// at an onset is integrated in u = √(x − onset) (x = onset + u², dx = 2u du), where such a shape
/// is smooth: the rule in x would converge only as a power of its width there.
pub(crate) fn rule(dom: Domain, onsets: &[f64], pieces: usize) -> Vec<(f64, f64)> {
    let mut cuts: Vec<f64> = onsets
        .iter()
        .copied()
        .filter(|&o| o > dom.lo && o < dom.hi)
        .collect();
    cuts.sort_by(f64::total_cmp);
    cuts.dedup();
    let starts_at_onset = |a: f64| onsets.contains(&a);
    let mut bounds = vec![dom.lo];
    bounds.extend(cuts);
    bounds.push(dom.hi);
    let mut nodes = Vec::with_capacity((bounds.len() - 1) * pieces * 8);
    for seg in bounds.windows(2) {
        let (a, b) = (seg[0], seg[1]);
        let (lo, hi, root) = match starts_at_onset(a) {
            true => (0.0, (b - a).sqrt(), true),
            false => (a, b, false),
        };
        let h = (hi - lo) / pieces as f64;
        for p in 0..pieces {
            let mid = lo + (p as f64 + 0.5) * h;
            for (u, w) in GL8 {
                let t = mid + 0.5 * h * u;
                let wt = 0.5 * h * w;
                nodes.push(match root {
                    true => (a + t * t, 2.0 * t * wt),
                    false => (t, wt),
                });
            }
        }
    }
    nodes
}

/// ∫ of e^(log_shape(x)) by the quadrature `nodes` ([`rule`]), as graph nodes (each node's x a
/// constant, so the integral's gradient comes from the same reverse pass as the events').
pub fn quadrature(
    g: &mut Graph,
    nodes: &[(f64, f64)],
    log_shape: &mut dyn FnMut(&mut Graph, Id) -> Id,
) -> Id {
    let terms: Vec<Id> = nodes
        .iter()
        .map(|&(x, w)| {
            let x = g.constant(x);
            let ls = log_shape(g, x);
            let f = g.exp(ls);
            g.scale(f, w)
        })
        .collect();
    g.sum(&terms)
}

/// The same rule computed at once from the log-shape's value at x (`log_shape_at`): what the
/// number of pieces is chosen with, without building graph nodes.
fn quadrature_value(nodes: &[(f64, f64)], log_shape_at: &dyn Fn(f64) -> f64) -> f64 {
    nodes.iter().map(|&(x, w)| w * log_shape_at(x).exp()).sum()
}

/// A shape without a closed-form integral, normalised by [`quadrature`] with enough pieces that
/// doubling them changes the integral by less than `tolerance` (relative) at the model's initial
/// point (`log_shape_at` gives the log-shape's value there at x): the pieces are chosen by
/// computing the rule directly (16, 32, … up to 4096 per segment between `onsets`, see
/// [`rule`]; stopping where the integral is not finite: more pieces cannot help; a zero
/// integral, a narrow peak the coarse rule misses, goes on being refined), the graph nodes
/// built once for the coarsest rule that agrees with the next finer one, and that agreement
/// returned as its accuracy (NaN where it could not be measured). Returns the normalised
/// log-density, the log of the integral (an extended density's expected count is the integral
/// of its shape) and the accuracy.
///
/// `cost` is the number of nodes one evaluation of the shape takes: the nodes stop where
/// nodes × cost would pass [`QUADRATURE_NODES`] (a large expression on 4096 pieces would
/// build tens of millions of nodes, and evaluate them at every point of a fit); the accuracy
/// returned then says what was reached.
#[allow(clippy::too_many_arguments)]
pub fn normalised_by_quadrature(
    g: &mut Graph,
    x: Id,
    dom: Domain,
    onsets: &[f64],
    tolerance: f64,
    cost: usize,
    log_shape_at: &dyn Fn(f64) -> f64,
    log_shape: &mut dyn FnMut(&mut Graph, Id) -> Id,
) -> (Id, Id, f64) {
    // Cuts only as many as the node budget holds at one piece a segment (the first onsets
    // kept: a Breit–Wigner lists its modelled channel first).
    let allowed = (QUADRATURE_NODES / (8 * cost.max(1))).saturating_sub(1);
    let onsets = &onsets[..onsets.len().min(allowed)];
    let segments = rule(dom, onsets, 1).len() / 8;
    let most = (QUADRATURE_NODES / (8 * segments * cost.max(1))).clamp(1, 4096);
    let mut pieces = 16.min(most);
    let mut last = quadrature_value(&rule(dom, onsets, pieces), log_shape_at);
    let mut all_zero = last == 0.0;
    let mut accuracy = f64::NAN;
    while pieces < 4096 && 2 * pieces <= most && last.is_finite() {
        let next = quadrature_value(&rule(dom, onsets, 2 * pieces), log_shape_at);
        accuracy = ((last - next) / next).abs();
        all_zero &= next == 0.0;
        if accuracy < tolerance {
            // The coarser rule already agrees with the finer one within the tolerance, at half
            // the nodes. (The agreement estimates its error well for a smooth shape; where the
            // shape has a kink inside a piece it can understate it, as for the finer rule.)
            break;
        }
        pieces *= 2;
        last = next;
    }
    if all_zero {
        // Zero on every grid tried: the model is refused at its initial point whatever the
        // pieces, so build the fewest (a fuzzed input spent a second on the finest).
        pieces = 16.min(most);
    }
    let integral = quadrature(g, &rule(dom, onsets, pieces), log_shape);
    let ls = log_shape(g, x);
    let ln = g.log(integral);
    (normalised(g, ls, ln), ln, accuracy)
}

/// ARGUS (RooArgusBG): m (1 − (m/m0)²)^p e^(c (1 − (m/m0)²)) below m0, 0 above. Normalised by
/// quadrature in v = √(1 − (m/m0)²), where ∫ over the domain is m0² ∫ v^(2p+1) e^(c v²) dv —
/// smooth at the endpoint m = m0, whose square-root edge would otherwise stall any rule
/// in m — with [`ARGUS_PIECES`] × 8 Gauss–Legendre nodes between the domain's limits in v
/// (nodes of the graph, so the integral follows m0, c and p in value and gradient).
pub fn argus(g: &mut Graph, m: Id, m0: Id, c: Id, p: Id, dom: Domain) -> Id {
    let one = g.constant(1.0);
    let zero = g.constant(0.0);
    let v_of = |g: &mut Graph, x: Id| -> Id {
        let r = g.div(x, m0);
        let r2 = g.powi(r, 2);
        let u = g.sub(one, r2);
        let u = g.max(u, zero);
        g.sqrt(u)
    };
    // The shape at the events, in logarithms.
    let r = g.div(m, m0);
    let r2 = g.powi(r, 2);
    let u = g.sub(one, r2);
    let lu = g.log(u);
    let pl = g.mul(p, lu);
    let cu = g.mul(c, u);
    let lm = g.log(m);
    let s = g.add(lm, pl);
    let inside = g.add(s, cu);
    let outside = g.constant(f64::NEG_INFINITY);
    let log_shape = g.select(u, inside, outside);
    // The integral: v from v(hi) to v(lo) (v falls as m rises; 0 at and above m0).
    let (lo, hi) = (g.constant(dom.lo), g.constant(dom.hi));
    let (va, vb) = (v_of(g, hi), v_of(g, lo));
    let width = g.sub(vb, va);
    let two_p1 = {
        let t = g.scale(p, 2.0);
        g.add(t, one)
    };
    let piece = g.scale(width, 1.0 / ARGUS_PIECES as f64);
    let mut terms = Vec::new();
    for k in 0..ARGUS_PIECES {
        for (xi, w) in GL8 {
            let at = (k as f64 + 0.5 * (1.0 + xi)) / ARGUS_PIECES as f64;
            let d = g.scale(width, at);
            let v = g.add(va, d);
            let lv = g.log(v);
            let a = g.mul(two_p1, lv);
            let v2 = g.powi(v, 2);
            let b = g.mul(c, v2);
            let e = g.add(a, b);
            let f = g.exp(e);
            terms.push(g.scale(f, 0.5 * w));
        }
    }
    let sum = g.sum(&terms);
    let sp = g.mul(sum, piece);
    let m02 = g.powi(m0, 2);
    let norm = g.mul(sp, m02);
    let log_norm = g.log(norm);
    normalised(g, log_shape, log_norm)
}

/// Quadrature pieces of [`argus`]'s normalisation (8 nodes each).
pub const ARGUS_PIECES: usize = 16;

/// One decay channel of a [`relativistic_breit_wigner_log_shape`]: its partial width Γ_BW (a
/// graph node: a parameter may move it), the daughters' masses, the orbital angular momentum
/// and the form factor's size R (numbers).
#[derive(Debug, Clone, Copy)]
pub struct BwChannel {
    pub gamma: Id,
    pub m1: f64,
    pub m2: f64,
    pub l: u32,
    pub r: f64,
}

/// The highest orbital angular momentum whose Blatt–Weisskopf factor is written out.
pub const BW_MAX_L: u32 = 4;

/// n_l²(z) = z^(2l) h_l²(z) as a rational function of y = z²: the Blatt–Weisskopf barrier
/// factors (1; y/(1 + y); y²/(9 + 3y + y²); …), 1 at l = 0 so that one channel of massless
/// daughters at l = 0 has a constant width.
fn blatt_weisskopf_sq(g: &mut Graph, y: Id, l: u32) -> Id {
    // Denominator coefficients, lowest power first (the leading one is 1).
    let den: &[f64] = match l {
        0 => return g.constant(1.0),
        1 => &[1.0],
        2 => &[9.0, 3.0],
        3 => &[225.0, 45.0, 6.0],
        _ => &[11_025.0, 1_575.0, 135.0, 10.0],
    };
    // Horner's rule: ((y + c_{l−1}) y + c_{l−2}) y + … + c_0.
    let mut d = y;
    for (k, &c) in den.iter().enumerate().rev() {
        let ck = g.constant(c);
        d = g.add(d, ck);
        if k > 0 {
            d = g.mul(d, y);
        }
    }
    let yl = g.powi(y, l as i32);
    g.div(yl, d)
}

/// HS3's `relativistic_breit_wigner_dist` at x, in logarithms and unnormalised:
///
///   x Γ₁(x) / |m_BW² − x² − i m_BW Γ(x)|²,  Γ(x) = Σ_i Γ_i(x),
///   Γ_i(x) = Γ_BW,i n_li²(x) ρ_i(x),  ρ_i = 2 q_i / x,  n_li² from z_i = q_i R_i,
///   q_i = √((x² − (m1 + m2)²)(x² − (m1 − m2)²)) / (2x),
///
/// the first channel the one whose mass spectrum is modelled. A channel below its threshold
/// (x < m1 + m2) is closed: its width is 0 there (so the density is 0 below the first
/// channel's threshold). The caller normalises it by quadrature.
pub fn relativistic_breit_wigner_log_shape(
    g: &mut Graph,
    x: Id,
    mass: Id,
    channels: &[BwChannel],
) -> Id {
    let s = g.powi(x, 2);
    let zero = g.constant(0.0);
    let mut widths = Vec::with_capacity(channels.len());
    for ch in channels {
        let (sum, diff) = (ch.m1 + ch.m2, ch.m1 - ch.m2);
        let a = g.constant(sum * sum);
        let b = g.constant(diff * diff);
        let sa = g.sub(s, a);
        let sb = g.sub(s, b);
        let num = g.mul(sa, sb);
        let s4 = g.scale(s, 4.0);
        let q2 = g.div(num, s4);
        // Closed below threshold.
        let threshold = g.constant(sum);
        let q2 = g.select_ge(x, threshold, q2, zero);
        // ρ = 2q/x = √(4q²/x²).
        let q2_4 = g.scale(q2, 4.0);
        let r2 = g.div(q2_4, s);
        let rho = g.sqrt(r2);
        let y = g.scale(q2, ch.r * ch.r);
        let n2 = blatt_weisskopf_sq(g, y, ch.l);
        let w = g.mul(ch.gamma, n2);
        widths.push(g.mul(w, rho));
    }
    let total = widths[1..].iter().fold(widths[0], |acc, &w| g.add(acc, w));
    let m2 = g.powi(mass, 2);
    let re = g.sub(m2, s);
    let re2 = g.powi(re, 2);
    let im = g.mul(mass, total);
    let im2 = g.powi(im, 2);
    let den = g.add(re2, im2);
    let lx = g.log(x);
    let lw = g.log(widths[0]);
    let ld = g.log(den);
    let top = g.add(lx, lw);
    g.sub(top, ld)
}

/// The decay basis of HS3's `decay_dist` (its `decayType`): e^(−t/τ) for t ≥ 0, e^(t/τ) for
/// t ≤ 0, or e^(−|t|/τ).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DecayBasis {
    SingleSided,
    Flipped,
    DoubleSided,
}

/// A resolution model a decay is convolved with: perfect resolution (δ(t)), or a Gaussian of
/// mean `mean` and width `sigma` in t.
#[derive(Debug, Clone, Copy)]
pub enum Resolution {
    Truth,
    Gauss { mean: Id, sigma: Id },
}

/// ln g(x), g(x) = ∫₀^∞ e^(−s/τ) N(x − s; 0, σ) ds = ½ e^(a²/2 − x/τ) erfc(w) with a = σ/τ and
/// w = (a − x/σ)/√2: the single-sided decay convolved with a centred Gaussian. Written as
/// −x²/(2σ²) + ln erfcx(w) − ln 2 where w ≥ 0 (erfcx(w) = e^(w²) erfc(w): no overflow of
/// e^(a²/2 − x/τ) against an underflowing erfc far below the peak) and as
/// a²/2 − x/τ + ln erfc(w) − ln 2 where w < 0 (erfc between 1 and 2 there).
fn gauss_decay_log(g: &mut Graph, x: Id, sigma: Id, tau: Id) -> Id {
    let a = g.div(sigma, tau);
    let xs = g.div(x, sigma);
    let d = g.sub(a, xs);
    let w = g.scale(d, std::f64::consts::FRAC_1_SQRT_2);
    // Above: erfcx at |w| (the branch is taken only where w ≥ 0; at −w, e^(w²) could overflow
    // in the events the other branch takes).
    let wabs = g.abs(w);
    let erfcx = g.erfcx(wabs);
    let l_erfcx = g.log(erfcx);
    let xs2 = g.powi(xs, 2);
    let h = g.scale(xs2, -0.5);
    let upper = g.add(h, l_erfcx);
    // Below: erfc directly.
    let erf = g.erf(w);
    let one = g.constant(1.0);
    let erfc = g.sub(one, erf);
    let l_erfc = g.log(erfc);
    let a2 = g.powi(a, 2);
    let ha2 = g.scale(a2, 0.5);
    let xt = g.div(x, tau);
    let e = g.sub(ha2, xt);
    let lower = g.add(e, l_erfc);
    let both = g.select(w, upper, lower);
    let ln2 = g.constant(-std::f64::consts::LN_2);
    g.add(both, ln2)
}

/// Φ(x/σ) = ½ (1 + erf(x/(σ√2))).
fn gauss_cdf(g: &mut Graph, x: Id, sigma: Id) -> Id {
    let z = g.div(x, sigma);
    let zr = g.scale(z, std::f64::consts::FRAC_1_SQRT_2);
    let e = g.erf(zr);
    let one = g.constant(1.0);
    let s = g.add(one, e);
    g.scale(s, 0.5)
}

/// One resolution model's convolved decay over t: its log-shape and its integral over the
/// domain, both without the factor 1/τ (a common factor of every model).
///
/// With a Gaussian (x = t − μ): the single-sided shape is g(x) ([`gauss_decay_log`]), the
/// flipped one g(−x), the double-sided one their sum; their integrals from −∞ to x are
/// τ(Φ(x/σ) − g(x)), τ(Φ(x/σ) + g(−x)) and the sum (g′ = N − g/τ). With perfect resolution,
/// the bases themselves: e^(−t/τ) for t ≥ 0 (0 below), e^(t/τ) for t ≤ 0, e^(−|t|/τ).
fn decay_component(
    g: &mut Graph,
    t: Id,
    tau: Id,
    basis: DecayBasis,
    res: Resolution,
    dom: Domain,
) -> (Id, Id) {
    match res {
        Resolution::Gauss { mean, sigma } => {
            let x = g.sub(t, mean);
            let shape = |g: &mut Graph, x: Id, sign: f64| {
                let sx = g.scale(x, sign);
                gauss_decay_log(g, sx, sigma, tau)
            };
            let log_shape = match basis {
                DecayBasis::SingleSided => shape(g, x, 1.0),
                DecayBasis::Flipped => shape(g, x, -1.0),
                DecayBasis::DoubleSided => {
                    let (l1, l2) = (shape(g, x, 1.0), shape(g, x, -1.0));
                    let one = g.constant(1.0);
                    log_sum_exp(g, &[(one, l1), (one, l2)])
                }
            };
            // ∫_{−∞}^b, over τ.
            let cumulative = |g: &mut Graph, b: f64| {
                let bc = g.constant(b);
                let xb = g.sub(bc, mean);
                let phi = gauss_cdf(g, xb, sigma);
                let right = |g: &mut Graph| {
                    let l = shape(g, xb, 1.0);
                    g.exp(l)
                };
                let left = |g: &mut Graph| {
                    let l = shape(g, xb, -1.0);
                    g.exp(l)
                };
                match basis {
                    DecayBasis::SingleSided => {
                        let r = right(g);
                        g.sub(phi, r)
                    }
                    DecayBasis::Flipped => {
                        let l = left(g);
                        g.add(phi, l)
                    }
                    DecayBasis::DoubleSided => {
                        let (r, l) = (right(g), left(g));
                        let p2 = g.scale(phi, 2.0);
                        let d = g.sub(p2, r);
                        g.add(d, l)
                    }
                }
            };
            let (hi, lo) = (cumulative(g, dom.hi), cumulative(g, dom.lo));
            let diff = g.sub(hi, lo);
            (log_shape, g.mul(diff, tau))
        }
        Resolution::Truth => {
            let tt = g.div(t, tau);
            let minus = g.neg(tt);
            let nothing = g.constant(f64::NEG_INFINITY);
            let log_shape = match basis {
                DecayBasis::SingleSided => g.select(t, minus, nothing),
                DecayBasis::Flipped => g.select(minus, tt, nothing),
                DecayBasis::DoubleSided => {
                    let a = g.abs(tt);
                    g.neg(a)
                }
            };
            // Each side's integral over the part of the range it covers, [u, v]: τ e^(−u/τ)
            // (1 − e^(−(v − u)/τ)) = e^(−u/τ) (v − u) exprel((v − u)/τ) on the single side (u,
            // v ≥ 0; mirrored on the flipped side) — no difference of two numbers near 1 where
            // the range begins many τ past the peak.
            let side = |g: &mut Graph, near: f64, far: f64| {
                let width = (far - near).abs();
                let near_c = g.constant(-near.abs());
                let start = g.div(near_c, tau);
                let e = g.exp(start);
                let w = g.constant(width);
                let t = g.div(w, tau);
                let x = g.exprel(t);
                let ex = g.mul(e, x);
                g.scale(ex, width)
            };
            let single = |g: &mut Graph| side(g, dom.lo.max(0.0), dom.hi.max(0.0));
            let flipped = |g: &mut Graph| side(g, dom.hi.min(0.0), dom.lo.min(0.0));
            let mass = match basis {
                DecayBasis::SingleSided => single(g),
                DecayBasis::Flipped => flipped(g),
                DecayBasis::DoubleSided => {
                    let (f, s) = (flipped(g), single(g));
                    g.add(f, s)
                }
            };
            (log_shape, mass)
        }
    }
}

/// HS3's `decay_dist`: the decay basis convolved with a resolution model — one, or a weighted
/// sum of several (`models`: each weight and model; the convolution is linear) — normalised
/// over the domain in closed form.
pub fn decay(
    g: &mut Graph,
    t: Id,
    tau: Id,
    basis: DecayBasis,
    models: &[(Id, Resolution)],
    dom: Domain,
) -> Id {
    let parts: Vec<(Id, Id)> = models
        .iter()
        .map(|&(_, r)| decay_component(g, t, tau, basis, r, dom))
        .collect();
    if let [(log_shape, mass)] = parts[..] {
        let log_norm = g.log(mass);
        return normalised(g, log_shape, log_norm);
    }
    let weighted: Vec<(Id, Id)> = models
        .iter()
        .zip(&parts)
        .map(|(&(c, _), &(l, _))| (c, l))
        .collect();
    let log_shape = log_sum_exp(g, &weighted);
    let mut mass = None;
    for (&(c, _), &(_, m)) in models.iter().zip(&parts) {
        let cm = g.mul(c, m);
        mass = Some(mass.map_or(cm, |s| g.add(s, cm)));
    }
    let log_norm = g.log(mass.expect("models"));
    normalised(g, log_shape, log_norm)
}

/// ln Σ c_k e^(l_k), taken from the largest l_k (m + ln Σ c_k e^(l_k − m)) so that terms whose
/// l_k lie below e^x's range (a decay far from its peak) do not all round to 0. m is floored
/// at −10³⁰⁰: where every l_k is −∞ (a density that is 0 there) the result is −∞, not NaN.
fn log_sum_exp(g: &mut Graph, terms: &[(Id, Id)]) -> Id {
    let floor = g.constant(-1e300);
    let m = terms.iter().fold(floor, |acc, &(_, l)| g.max(acc, l));
    let mut sum = None;
    for &(c, l) in terms {
        let d = g.sub(l, m);
        let e = g.exp(d);
        let ce = g.mul(c, e);
        sum = Some(sum.map_or(ce, |s| g.add(s, ce)));
    }
    let ls = g.log(sum.expect("terms"));
    g.add(m, ls)
}
