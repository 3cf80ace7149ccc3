// histfit's portable f32 likelihood kernel (WGSL, through wgpu: Vulkan, Metal, DX12).
//
// One workgroup per problem (parameter vector + dataset), the same phases as the CUDA kernel
// over the same flat tables (histfit_compute::flat): normsys factors, sample-bin yields and bin
// factors, sample factors, expected counts and the Poisson and constraint terms, then the
// reverse pass into per-parameter "term" slots summed in a fixed order.
//
// Every real is a vec2<f32>. What the pair means is the precision strategy (STRATEGY, a
// pipeline constant, so the untaken branches fold away):
//   0 (host): plain f32 (.y = 0); the per-bin terms and the gradient's term slots are written
//             out and reduced in f64 on the host;
//   1 (compensated): plain f32 values; sums carry a Neumaier compensation in .y;
//   2 (double-float): .x + .y is one value of about 48 bits (an unevaluated sum of two f32),
//             used throughout: the expected counts, their logarithm near the data, the
//             constraint terms, the reverse pass and every sum.
// The header the host prepends defines the constants shared with Rust: interpolation codes,
// constraint kinds, the empty-bin wall.

override STRATEGY: u32 = 2u;
// Dimensions of the model.
override N_PARAMS: u32;
override N_MAIN: u32;
override N_AUX: u32;
override N_SAMPLES: u32;
override N_SB: u32;
override N_NS: u32;
override N_SF: u32;
override N_HS: u32;
override N_TERMS: u32;
// Offsets of the integer tables in `ints` and of the real tables in `reals`.
override O_SMP: u32;
override O_SB_SAMPLE: u32;
override O_SB_BIN: u32;
override O_BF_OFF: u32;
override O_BF_PAR: u32;
override O_SF_PAR: u32;
override O_SF_SAMPLE: u32;
override O_NS_PAR: u32;
override O_NS_CODE: u32;
override O_NS_SAMPLE: u32;
override O_HS_PAR: u32;
override O_HS_CODE: u32;
override O_HS_SAMPLE: u32;
override O_HS_ROW: u32;
override O_BIN_OFF: u32;
override O_BIN_SB: u32;
override O_AUX_PAR: u32;
override O_AUX_KIND: u32;
override O_TERM_OFF: u32;
override O_TERM_IDX: u32;
// An integer 0 the compiler cannot see (double-float's `op`).
override O_ZERO: u32;
override O_NOMINAL: u32;
override O_NS_COEF: u32;
override O_HS_COEF: u32;
override O_HS_POLY: u32;
override O_AUX_CONST: u32;
// Per-problem sizes: scratch (vec2 slots), output (f32 slots).
override SCRATCH: u32;
override OUT_LEN: u32;

const WG: u32 = 64u;

@group(0) @binding(0) var<storage, read> ints: array<i32>;
@group(0) @binding(1) var<storage, read> reals: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read> params: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read> data: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read> data_index: array<u32>;
@group(0) @binding(5) var<storage, read_write> scratch: array<vec2<f32>>;
@group(0) @binding(6) var<storage, read_write> outs: array<f32>;

var<workgroup> red: array<vec2<f32>, WG>;
var<workgroup> invalid: atomic<u32>;

// ---------------------------------------------------------------------------------------------
// Reals under the strategy: values (r*), and accumulators (acc*, fin) that are compensated or
// double-float where the strategy says so.

fn rv(x: f32) -> vec2<f32> {
    return vec2<f32>(x, 0.0);
}

fn radd(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    if (STRATEGY == 2u) {
        return df_add(a, b);
    }
    return vec2<f32>(a.x + b.x, 0.0);
}

fn rmul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    if (STRATEGY == 2u) {
        return df_mul(a, b);
    }
    return vec2<f32>(a.x * b.x, 0.0);
}

fn rexp(a: vec2<f32>) -> vec2<f32> {
    if (STRATEGY == 2u) {
        return df_exp(a);
    }
    return vec2<f32>(exp(a.x), 0.0);
}

// Adds the value v to the accumulator s.
fn acc(s: vec2<f32>, v: vec2<f32>) -> vec2<f32> {
    if (STRATEGY == 2u) {
        return df_add(s, v);
    }
    if (STRATEGY == 1u) {
        // Neumaier: the running sum in .x, the lost low-order parts in .y.
        let t = op(s.x + v.x);
        var c = s.y;
        if (abs(s.x) >= abs(v.x)) {
            c += (s.x - t) + v.x;
        } else {
            c += (v.x - t) + s.x;
        }
        return vec2<f32>(t, c);
    }
    return vec2<f32>(s.x + v.x, 0.0);
}

// Merges two accumulators.
fn acc2(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    if (STRATEGY == 1u) {
        let s = acc(a, vec2<f32>(b.x, 0.0));
        return vec2<f32>(s.x, s.y + b.y);
    }
    return acc(a, b);
}

// An accumulator's value.
fn fin(s: vec2<f32>) -> vec2<f32> {
    if (STRATEGY == 1u) {
        return vec2<f32>(s.x + s.y, 0.0);
    }
    return s;
}

// A real of a table or buffer as the strategy reads it (the low part only where it is used).
fn ld(v: vec2<f32>) -> vec2<f32> {
    if (STRATEGY == 2u) {
        return v;
    }
    return vec2<f32>(v.x, 0.0);
}

// Whether x is NaN or ±inf, by its bits: compilers may assume floats are finite (and SPIR-V's
// ordered comparisons make x != x false for NaN). An expected count that overflows f32 is
// treated as where the likelihood is not defined, as a NaN one is.
fn not_finite(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) >= 0x7f800000u;
}

// −ln L of a Poisson count n at mean l relative to its saturated value, l − n − n ln(l/n),
// and its derivative 1 − n/l in .z; .w = 1 where the likelihood is zero. Below λ = 0 an empty
// bin continues as histfit_compute::EMPTY_BIN_WALL says.
fn poisson_term(l: vec2<f32>, n: vec2<f32>) -> vec4<f32> {
    if (n.x > 0.0) {
        if (!(l.x > 0.0) || not_finite(l.x)) {
            return vec4<f32>(0.0, 0.0, 0.0, 1.0);
        }
        if (STRATEGY != 2u) {
            let v = l.x - n.x - n.x * log(l.x / n.x);
            return vec4<f32>(v, 0.0, 1.0 - n.x / l.x, 0.0);
        }
        let d = df_add(l, -n);
        let dl = d.x / l.x;
        if (abs(d.x) < 0.05 * n.x) {
            // n (r − ln(1 + r)) with r = d/n and u = r/(2 + r): r − ln(1 + r) =
            // u r − 2(u³/3 + u⁵/5 + …), a series with no cancellation near the data (where
            // f32's logarithm has only an absolute accuracy). The leading u r = d²/(n(2n + d))
            // in double-float; the rest, under 2 % of it, in f32.
            let u = df_div(d, df_add(df_add(n, n), d));
            let r = d.x / n.x;
            let u2 = u.x * u.x;
            let rest = 2.0 * u.x * u2 * (1.0 / 3.0 + u2 * (1.0 / 5.0 + u2 * (1.0 / 7.0 + u2 / 9.0)));
            let t = df_add(df_mul(u, d), -df_mul(n, rv(rest)));
            return vec4<f32>(t.x, t.y, dl, 0.0);
        }
        let t = df_add(d, -df_mul(n, df_log(df_div(l, n))));
        return vec4<f32>(t.x, t.y, dl, 0.0);
    }
    if (l.x >= 0.0) {
        return vec4<f32>(l.x, l.y, 1.0, 0.0);
    }
    if (not_finite(l.x)) {
        return vec4<f32>(0.0, 0.0, 0.0, 1.0);
    }
    let t = radd(l, rv(l.x * l.x / (2.0 * EMPTY_BIN_WALL)));
    return vec4<f32>(t.x, t.y, 1.0 + l.x / EMPTY_BIN_WALL, 0.0);
}

// ---------------------------------------------------------------------------------------------
// Interpolation (histfit_model::interp): additive weights (codes 0, 2, 4p), multiplicative
// values (codes 1, 4).

// The four weights of an additive code at α = a and their derivatives, as reals under the
// strategy (double-float where it applies, so Δ and its slope keep the parameter's precision).
struct Weights {
    w: array<vec2<f32>, 4>,
    dw: array<vec2<f32>, 4>,
}

fn additive_weights(code: i32, a: vec2<f32>) -> Weights {
    let zero = rv(0.0);
    var r = Weights(array<vec2<f32>, 4>(zero, zero, zero, zero), array<vec2<f32>, 4>(zero, zero, zero, zero));
    let x = a.x;
    if (code == CODE0) {
        if (x > 0.0) {
            r.w[0] = a;
            r.dw[0] = rv(1.0);
        } else if (x < 0.0) {
            r.w[1] = a;
            r.dw[1] = rv(1.0);
        } else {
            r.dw[0] = rv(0.5);
            r.dw[1] = rv(0.5);
        }
    } else if (code == CODE2) {
        if (x > 1.0) {
            let t = radd(a, rv(-1.0));
            r.w[0] = t * 2.0;
            r.w[1] = t;
            r.w[2] = rv(1.0);
            r.dw[0] = rv(2.0);
            r.dw[1] = rv(1.0);
        } else if (x < -1.0) {
            let t = radd(a, rv(1.0));
            r.w[0] = t * -2.0;
            r.w[1] = t;
            r.w[3] = rv(-1.0);
            r.dw[0] = rv(-2.0);
            r.dw[1] = rv(1.0);
        } else {
            r.w[0] = rmul(a, a);
            r.w[1] = a;
            r.dw[0] = a * 2.0;
            r.dw[1] = rv(1.0);
        }
    } else if (code == CODE4P) {
        if (x > 1.0) {
            r.w[2] = a;
            r.dw[2] = rv(1.0);
        } else if (x < -1.0) {
            r.w[3] = a;
            r.dw[3] = rv(1.0);
        } else {
            // w1 = a² (15 + a² (3a² − 10)), w1' = a (30 + a² (18a² − 40))
            let a2 = rmul(a, a);
            r.w[0] = a;
            r.dw[0] = rv(1.0);
            r.w[1] = rmul(a2, radd(rv(15.0), rmul(a2, radd(rmul(a2, rv(3.0)), rv(-10.0)))));
            r.dw[1] = rmul(a, radd(rv(30.0), rmul(a2, radd(rmul(a2, rv(18.0)), rv(-40.0)))));
        }
    }
    return r;
}

// Σ w_i c_i of four table reals from `at` (the additive Δ or factor − 1) in .xy and its
// derivative in .zw.
fn additive(code: i32, a: vec2<f32>, at: u32) -> vec4<f32> {
    let wt = additive_weights(code, a);
    var v = rv(0.0);
    var d = rv(0.0);
    for (var i = 0u; i < 4u; i++) {
        let c = ld(reals[at + i]);
        v = radd(v, rmul(wt.w[i], c));
        d = radd(d, rmul(wt.dw[i], c));
    }
    return vec4<f32>(v, d);
}

fn is_mult(code: i32) -> bool {
    return code == CODE1 || code == CODE4;
}

// The multiplicative factor at α = a from [ln up, ln dn] at `lnc` and the six polynomial
// coefficients at `poly` (code 4 inside |α| < 1) in .xy, its derivative in .zw.
fn multiplicative(code: i32, a: vec2<f32>, lnc: u32, poly: u32) -> vec4<f32> {
    let lu = ld(reals[lnc]);
    let ld_ = ld(reals[lnc + 1u]);
    if (a.x >= 1.0 || (code == CODE1 && a.x > 0.0)) {
        let k = rexp(rmul(a, lu));
        return vec4<f32>(k, rmul(k, lu));
    }
    if (a.x <= -1.0 || (code == CODE1 && a.x < 0.0)) {
        let k = rexp(rmul(-a, ld_));
        return vec4<f32>(k, -rmul(k, ld_));
    }
    if (code == CODE1) {
        return vec4<f32>(rv(1.0), radd(lu, -ld_) * 0.5);
    }
    // 1 + a(p1 + a(p2 + … + a p6)), Horner from the inside.
    var v = ld(reals[poly + 5u]);
    var d = rmul(v, rv(6.0));
    for (var i = 4; i >= 0; i--) {
        let p = ld(reals[poly + u32(i)]);
        v = radd(p, rmul(a, v));
        d = radd(rmul(p, rv(f32(i + 1))), rmul(a, d));
    }
    let k = radd(rv(1.0), rmul(a, v));
    return vec4<f32>(k, d);
}

// Δ and dΔ/dα of histosys entry `e` in row `r` (the entry's first row + the bin).
fn histo_row(code: i32, a: vec2<f32>, r: u32) -> vec4<f32> {
    let c0 = 4u * r;
    if (is_mult(code)) {
        // coefficients [nominal, ln up, ln dn, –] and the polynomial row.
        let k = multiplicative(code, a, O_HS_COEF + c0 + 1u, O_HS_POLY + 6u * r);
        let nom = ld(reals[O_HS_COEF + c0]);
        let dl = rmul(nom, radd(k.xy, rv(-1.0)));
        return vec4<f32>(dl, rmul(nom, k.zw));
    }
    return additive(code, a, O_HS_COEF + c0);
}

fn I(o: u32, k: u32) -> u32 {
    return u32(ints[o + k]);
}

// ---------------------------------------------------------------------------------------------

// Sums the workgroup's accumulators in a fixed tree; every invocation gets the total.
fn reduce(v: vec2<f32>, t: u32) -> vec2<f32> {
    red[t] = v;
    workgroupBarrier();
    for (var h = WG / 2u; h > 0u; h = h / 2u) {
        if (t < h) {
            red[t] = acc2(red[t], red[t + h]);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

// Ends a phase: scratch lives in a storage buffer, so its writes need a storage barrier besides
// the workgroup barrier to be seen by the other invocations of the workgroup.
fn phase() {
    storageBarrier();
    workgroupBarrier();
}

@compute @workgroup_size(64)
fn nll_grad(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let p = wid.x;
    let t = lid.x;
    let P = N_PARAMS;
    let M = N_MAIN;
    // Scratch of this problem: x[P] kv[ns] kd[ns] F[S] base[sb] binfac[sb] gb[sb] lam[M]
    // dlam[M] wsamp[S] terms[T] contrib[M + n_aux].
    let x = p * SCRATCH;
    let kv = x + P;
    let kd = kv + N_NS;
    let F = kd + N_NS;
    let base = F + N_SAMPLES;
    let binfac = base + N_SB;
    let gb = binfac + N_SB;
    let lam = gb + N_SB;
    let dlam = lam + M;
    let wsamp = dlam + M;
    let terms = wsamp + N_SAMPLES;
    let contrib = terms + N_TERMS;
    let row = data_index[p] * (M + N_AUX);
    let out = p * OUT_LEN;
    df_zero = u32(ints[O_ZERO]);
    if (t == 0u) {
        atomicStore(&invalid, 0u);
    }
    for (var i = t; i < P; i += WG) {
        scratch[x + i] = ld(params[p * P + i]);
    }
    phase();
    // normsys factors
    for (var e = t; e < N_NS; e += WG) {
        let code = ints[O_NS_CODE + e];
        let a = scratch[x + I(O_NS_PAR, e)];
        let c = O_NS_COEF + 8u * e;
        var k: vec4<f32>;
        if (is_mult(code)) {
            k = multiplicative(code, a, c, c + 2u);
        } else {
            k = additive(code, a, c);
            k = vec4<f32>(radd(rv(1.0), k.xy), k.zw);
        }
        scratch[kv + e] = k.xy;
        scratch[kd + e] = k.zw;
    }
    // sample-bin yields (nominal + Δ) and bin factors
    for (var sb = t; sb < N_SB; sb += WG) {
        let sm = O_SMP + 9u * I(O_SB_SAMPLE, sb);
        let k = sb - I(sm, 2u);
        var b = ld(reals[O_NOMINAL + sb]);
        for (var e = I(sm, 7u); e < I(sm, 8u); e++) {
            let h = histo_row(ints[O_HS_CODE + e], scratch[x + I(O_HS_PAR, e)], I(O_HS_ROW, e) + k);
            b = radd(b, h.xy);
        }
        scratch[base + sb] = b;
        var bf = rv(1.0);
        for (var j = I(O_BF_OFF, sb); j < I(O_BF_OFF, sb + 1u); j++) {
            bf = rmul(bf, scratch[x + I(O_BF_PAR, j)]);
        }
        scratch[binfac + sb] = bf;
    }
    phase();
    // sample factors
    for (var s = t; s < N_SAMPLES; s += WG) {
        let sm = O_SMP + 9u * s;
        var f = rv(1.0);
        for (var j = I(sm, 3u); j < I(sm, 4u); j++) {
            f = rmul(f, scratch[x + I(O_SF_PAR, j)]);
        }
        for (var e = I(sm, 5u); e < I(sm, 6u); e++) {
            f = rmul(f, scratch[kv + e]);
        }
        scratch[F + s] = f;
    }
    phase();
    // expected counts, Poisson terms, ∂NLL/∂λ
    for (var b = t; b < M; b += WG) {
        var l = rv(0.0);
        for (var j = I(O_BIN_OFF, b); j < I(O_BIN_OFF, b + 1u); j++) {
            let sb = I(O_BIN_SB, j);
            let y = rmul(rmul(scratch[base + sb], scratch[binfac + sb]), scratch[F + I(O_SB_SAMPLE, sb)]);
            l = acc(l, y);
        }
        l = fin(l);
        scratch[lam + b] = l;
        let n = ld(data[row + b]);
        let pt = poisson_term(l, n);
        if (pt.w != 0.0) {
            atomicOr(&invalid, 1u);
        }
        scratch[contrib + b] = pt.xy;
        if (STRATEGY == 2u && n.x > 0.0 && l.x > 0.0) {
            scratch[dlam + b] = df_div(df_add(l, -n), l);
        } else {
            scratch[dlam + b] = rv(pt.z);
        }
    }
    // constraint terms
    for (var k = t; k < N_AUX; k += WG) {
        let par = I(O_AUX_PAR, k);
        let xv = scratch[x + par];
        let a = ld(data[row + M + k]);
        let c = ld(reals[O_AUX_CONST + k]);
        var g = rv(0.0);
        var v = rv(0.0);
        let kind = ints[O_AUX_KIND + k];
        if (kind == KIND_GAUSS) {
            let d = radd(xv, -a);
            if (STRATEGY == 2u) {
                let z = df_div(d, c);
                v = df_mul(z, z) * 0.5;
            } else {
                let z = d.x / c.x;
                v = rv(0.5 * z * z);
            }
            if (STRATEGY == 2u) {
                g = df_div(df_div(d, c), c);
            } else {
                g = rv(d.x / (c.x * c.x));
            }
        } else if (kind == KIND_POISSON) {
            let rate = rmul(xv, c);
            if (rate.x < 0.0 || (rate.x == 0.0 && a.x > 0.0)) {
                atomicOr(&invalid, 1u);
            } else if (a.x > 0.0) {
                let pt = poisson_term(rate, a);
                v = pt.xy;
                if (STRATEGY == 2u) {
                    g = df_add(c, -df_div(a, xv));
                } else {
                    g = rv(c.x - a.x / xv.x);
                }
            } else {
                v = rate;
                g = c;
            }
        }
        scratch[terms + k] = g;
        scratch[contrib + M + k] = v;
    }
    phase();
    // The likelihood: on the host (strategy 0) or reduced here.
    if (STRATEGY == 0u) {
        for (var i = t; i < M + N_AUX; i += WG) {
            outs[out + 1u + i] = scratch[contrib + i].x;
        }
    } else {
        var s = rv(0.0);
        for (var i = t; i < M + N_AUX; i += WG) {
            s = acc(s, scratch[contrib + i]);
        }
        let total = fin(reduce(s, t));
        if (t == 0u) {
            outs[out + 1u] = total.x;
            outs[out + 2u] = total.y;
        }
    }
    // reverse pass (term slots: [aux][normsys][scale factors][histosys][bin factors])
    let t_ns = N_AUX;
    let t_sf = t_ns + N_NS;
    let t_hs = t_sf + N_SF;
    let t_bf = t_hs + N_HS;
    for (var sb = t; sb < N_SB; sb += WG) {
        let s = I(O_SB_SAMPLE, sb);
        let dl = scratch[dlam + I(O_SB_BIN, sb)];
        scratch[gb + sb] = rmul(dl, scratch[binfac + sb]);
        let outer = rmul(rmul(dl, scratch[base + sb]), scratch[F + s]);
        let j0 = I(O_BF_OFF, sb);
        let j1 = I(O_BF_OFF, sb + 1u);
        for (var j = j0; j < j1; j++) {
            var others = outer;
            for (var q = j0; q < j1; q++) {
                if (q != j) {
                    others = rmul(others, scratch[x + I(O_BF_PAR, q)]);
                }
            }
            scratch[terms + t_bf + j] = others;
        }
    }
    for (var s = t; s < N_SAMPLES; s += WG) {
        let sm = O_SMP + 9u * s;
        var w = rv(0.0);
        for (var k = 0u; k < I(sm, 1u); k++) {
            let sb = I(sm, 2u) + k;
            w = acc(w, rmul(rmul(scratch[dlam + I(sm, 0u) + k], scratch[base + sb]), scratch[binfac + sb]));
        }
        scratch[wsamp + s] = fin(w);
    }
    phase();
    for (var e = t; e < N_NS; e += WG) {
        let s = I(O_NS_SAMPLE, e);
        let sm = O_SMP + 9u * s;
        var others = rmul(scratch[wsamp + s], scratch[kd + e]);
        for (var j = I(sm, 3u); j < I(sm, 4u); j++) {
            others = rmul(others, scratch[x + I(O_SF_PAR, j)]);
        }
        for (var q = I(sm, 5u); q < I(sm, 6u); q++) {
            if (q != e) {
                others = rmul(others, scratch[kv + q]);
            }
        }
        scratch[terms + t_ns + e] = others;
    }
    for (var j = t; j < N_SF; j += WG) {
        let s = I(O_SF_SAMPLE, j);
        let sm = O_SMP + 9u * s;
        var others = scratch[wsamp + s];
        for (var q = I(sm, 3u); q < I(sm, 4u); q++) {
            if (q != j) {
                others = rmul(others, scratch[x + I(O_SF_PAR, q)]);
            }
        }
        for (var q = I(sm, 5u); q < I(sm, 6u); q++) {
            others = rmul(others, scratch[kv + q]);
        }
        scratch[terms + t_sf + j] = others;
    }
    for (var e = t; e < N_HS; e += WG) {
        let s = I(O_HS_SAMPLE, e);
        let sm = O_SMP + 9u * s;
        let a = scratch[x + I(O_HS_PAR, e)];
        var g = rv(0.0);
        for (var k = 0u; k < I(sm, 1u); k++) {
            let h = histo_row(ints[O_HS_CODE + e], a, I(O_HS_ROW, e) + k);
            g = acc(g, rmul(scratch[gb + I(sm, 2u) + k], h.zw));
        }
        scratch[terms + t_hs + e] = rmul(fin(g), scratch[F + s]);
    }
    phase();
    if (STRATEGY == 0u) {
        for (var i = t; i < N_TERMS; i += WG) {
            outs[out + 1u + M + N_AUX + i] = scratch[terms + i].x;
        }
    } else {
        for (var i = t; i < P; i += WG) {
            var g = rv(0.0);
            for (var j = I(O_TERM_OFF, i); j < I(O_TERM_OFF, i + 1u); j++) {
                g = acc(g, scratch[terms + I(O_TERM_IDX, j)]);
            }
            g = fin(g);
            outs[out + 3u + 2u * i] = g.x;
            outs[out + 4u + 2u * i] = g.y;
        }
    }
    phase();
    if (t == 0u) {
        outs[out] = f32(atomicLoad(&invalid));
    }
}
