// Double-float arithmetic (an unevaluated sum hi + lo of two f32; Dekker, Knuth), shared by
// histfit's WGSL kernels (the host prepends it). The product's error term needs a fused
// multiply-add, which Vulkan, Metal and DX12 GPUs provide.
//
// The error terms ((a + b) − a − b and the like) are zero in real-number algebra, and shader
// compilers that treat floating point as real numbers (Mesa's NIR does, without SPIR-V's
// NoContraction, which naga does not emit) remove them. `op` hides a rounded result from such
// rewriting: it flips no bits, but through a value the compiler cannot know (`df_zero`, which
// every entry point loads from a buffer holding 0). probe.rs checks the result on each adapter.

var<private> df_zero: u32;

fn op(x: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(x) ^ df_zero);
}

fn two_sum(a: f32, b: f32) -> vec2<f32> {
    let s = op(a + b);
    let v = op(s - a);
    return vec2<f32>(s, (a - (s - v)) + (b - v));
}

fn fast_two_sum(a: f32, b: f32) -> vec2<f32> {
    let s = op(a + b);
    return vec2<f32>(s, b - (s - a));
}

fn df_add(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    let s = two_sum(a.x, b.x);
    let t = two_sum(a.y, b.y);
    let r = fast_two_sum(s.x, s.y + t.x);
    return fast_two_sum(r.x, r.y + t.y);
}

// Whether the adapter's fma is fused (one rounding). Where the compiler splits it into a
// multiply and an add (llvmpipe does), the product's error comes from Dekker's splitting into
// 12-bit halves instead, whose partial products are exact however they are contracted.
override DF_FMA: bool = true;

fn split12(a: f32) -> vec2<f32> {
    let t = op(4097.0 * a);
    let hi = op(t - op(t - a));
    return vec2<f32>(hi, a - hi);
}

// a·b as a double-float: the rounded product and its exact error.
fn two_prod(a: f32, b: f32) -> vec2<f32> {
    let p = op(a * b);
    if (DF_FMA) {
        return vec2<f32>(p, fma(a, b, -p));
    }
    let x = split12(a);
    let y = split12(b);
    return vec2<f32>(p, ((op(x.x * y.x - p) + x.x * y.y) + x.y * y.x) + x.y * y.y);
}

fn df_mul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    let p = two_prod(a.x, b.x);
    return fast_two_sum(p.x, p.y + (a.x * b.y + a.y * b.x));
}

fn df_div(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    let q1 = a.x / b.x;
    let r1 = df_add(a, -df_mul(b, vec2<f32>(q1, 0.0)));
    let q2 = r1.x / b.x;
    let r2 = df_add(r1, -df_mul(b, vec2<f32>(q2, 0.0)));
    let q3 = r2.x / b.x;
    return df_add(fast_two_sum(q1, q2), vec2<f32>(q3, 0.0));
}

// ln 2 as a double-float.
const LN2_DF: vec2<f32> = vec2<f32>(0.693147182464599609375, -1.904654323148236e-09);

// e^a − 1 for a double-float a: a = k ln 2 + r, |r| ≤ ln2/2; r/16 by a short Taylor series
// whose tail (beyond s²/2) is f32, then squared four times as (1 + e)² − 1 = e(2 + e).
// Relative error about 1e-12 over the range the likelihood uses.
fn df_exp(a: vec2<f32>) -> vec2<f32> {
    let k = round(a.x / LN2_DF.x);
    let r = df_add(a, -df_mul(LN2_DF, vec2<f32>(k, 0.0)));
    let s = r * 0.0625;
    let tail = s.x * (1.0 / 6.0 + s.x * (1.0 / 24.0 + s.x * (1.0 / 120.0 + s.x / 720.0)));
    let s2 = df_mul(s, s);
    var e = df_add(s, df_mul(s2, two_sum(0.5, tail)));
    for (var i = 0; i < 4; i++) {
        e = df_mul(e, df_add(vec2<f32>(2.0, 0.0), e));
    }
    let v = df_add(vec2<f32>(1.0, 0.0), e);
    let ki = i32(k);
    return vec2<f32>(ldexp(v.x, ki), ldexp(v.y, ki));
}

// ln a for a double-float a > 0: f32's logarithm, then two Newton steps y + a e^{−y} − 1 (each
// squares the error; GPUs' f32 logarithms are good to between 1e-7 and 1e-4).
fn df_log(a: vec2<f32>) -> vec2<f32> {
    var y = vec2<f32>(log(a.x), 0.0);
    for (var i = 0; i < 2; i++) {
        y = df_add(y, df_add(df_mul(a, df_exp(-y)), vec2<f32>(-1.0, 0.0)));
    }
    return y;
}

