// Checks the double-float functions on one adapter: for every input pair (a, b) the sum,
// product, quotient, e^a and ln b, each as a double-float pair (see probe.rs).

@group(0) @binding(0) var<storage, read> inputs: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read_write> results: array<vec2<f32>>;

@compute @workgroup_size(1)
fn probe(@builtin(workgroup_id) wid: vec3<u32>) {
    let i = wid.x;
    // The last input is an extra pair whose bits are 0.
    df_zero = bitcast<u32>(inputs[arrayLength(&inputs) - 1u].x);
    let a = inputs[2u * i];
    let b = inputs[2u * i + 1u];
    results[5u * i] = df_add(a, b);
    results[5u * i + 1u] = df_mul(a, b);
    results[5u * i + 2u] = df_div(a, b);
    results[5u * i + 3u] = df_exp(a);
    results[5u * i + 4u] = df_log(b);
}
