// histfit CUDA kernels (f64). Compiled at run time by NVRTC with --fmad=false, so every
// multiply and add rounds exactly as on the CPU and the toy generator reproduces the CPU's bits.
//
// nll_grad_batch: one thread block per problem (parameter vector + dataset). The block walks the
// compiled model's tables in phases separated by __syncthreads(): normsys factors, sample factors
// and sample-bin yields, expected counts and the likelihood, then the reverse pass. Every
// gradient contribution is written to its own "term" slot and each parameter sums its slots in a
// fixed order (CSR lists built on the host), so results do not depend on thread scheduling.
//
// generate_toys: one thread per toy, the Philox4x32-10 streams and samplers of
// histfit-compute's rng.rs, line for line.
//
// Compile time: the large device functions of the fits (eval_point, descend, polish,
// lbfgsb_direction, fit_kinked and the kink rounds) are __noinline__. Inlined at every call site
// they made 8.8 MB of PTX and 5 minutes of NVRTC + ptxas per architecture; out of line 2.1 MB and
// 82 s, with the toys' results the same bits and their speed within 3 % (H200, session 35).
// The binary ships kernels built ahead for the common GPUs (prebuilt/, kernels.rs).

typedef unsigned int u32;
typedef unsigned long long u64;

// Constants shared with Rust (the empty-bin continuation, the interpolation code numbers, the
// constraint kinds, the toy generator's Philox, ln 2, stream and Poisson-switch constants) are
// defined there once and passed as -D options (histfit-cuda's kernels.rs, shared_definitions).
// The samplers' own algorithm coefficients are ported line for line, checked bit for bit.

__device__ __forceinline__ void additive_weights(int code, double a, double* w, double* dw) {
    w[0] = w[1] = w[2] = w[3] = 0.0;
    dw[0] = dw[1] = dw[2] = dw[3] = 0.0;
    if (code == CODE0) {
        if (a > 0.0) { w[0] = a; dw[0] = 1.0; }
        else if (a < 0.0) { w[1] = a; dw[1] = 1.0; }
        else { dw[0] = 0.5; dw[1] = 0.5; }
    } else if (code == CODE2) {
        if (a > 1.0) {
            double t = a - 1.0;
            w[0] = 2.0 * t; w[1] = t; w[2] = 1.0;
            dw[0] = 2.0; dw[1] = 1.0;
        } else if (a < -1.0) {
            double t = a + 1.0;
            w[0] = -2.0 * t; w[1] = t; w[3] = -1.0;
            dw[0] = -2.0; dw[1] = 1.0;
        } else {
            w[0] = a * a; w[1] = a;
            dw[0] = 2.0 * a; dw[1] = 1.0;
        }
    } else if (code == CODE4P) { // (multiplicative codes never come here: weights stay 0)
        if (a > 1.0) { w[2] = a; dw[2] = 1.0; }
        else if (a < -1.0) { w[3] = a; dw[3] = 1.0; }
        else {
            double a2 = a * a;
            w[0] = a; dw[0] = 1.0;
            w[1] = a2 * (15.0 + a2 * (3.0 * a2 - 10.0));
            dw[1] = a * (30.0 + a2 * (18.0 * a2 - 40.0));
        }
    }
}

// c = [ln up, ln dn, p1..p6]
__device__ __forceinline__ void multiplicative_value(int code, const double* c, double a, double* v, double* d) {
    if (a >= 1.0 || (code == CODE1 && a > 0.0)) {
        double k = exp(a * c[0]);
        *v = k; *d = k * c[0];
    } else if (a <= -1.0 || (code == CODE1 && a < 0.0)) {
        double k = exp(-a * c[1]);
        *v = k; *d = -k * c[1];
    } else if (code == CODE1) {
        *v = 1.0; *d = 0.5 * (c[0] - c[1]);
    } else {
        const double* p = c + 2;
        double val = a * (p[0] + a * (p[1] + a * (p[2] + a * (p[3] + a * (p[4] + a * p[5])))));
        double der = p[0] + a * (2.0 * p[1] + a * (3.0 * p[2] + a * (4.0 * p[3] + a * (5.0 * p[4] + a * 6.0 * p[5]))));
        *v = 1.0 + val; *d = der;
    }
}

__device__ __forceinline__ bool is_mult(int code) { return code == CODE1 || code == CODE4; }

// A normsys entry's factor κ(α) and dκ/dα (coefficients c: 8 per entry).
__device__ __forceinline__ void normsys_factor(int code, const double* c, double a, double* v, double* d) {
    if (is_mult(code)) {
        multiplicative_value(code, c, a, v, d);
    } else {
        double w[4], dw[4];
        additive_weights(code, a, w, dw);
        *v = 1.0 + w[0] * c[0] + w[1] * c[1] + w[2] * c[2] + w[3] * c[3];
        *d = dw[0] * c[0] + dw[1] * c[1] + dw[2] * c[2] + dw[3] * c[3];
    }
}

// Δ and dΔ/dα of one histosys row (entry e, bin row r).
__device__ __forceinline__ void histo_row(int code, const double* coef4, const double* poly6, double a,
                                          double* delta, double* ddelta) {
    if (code == CODE0) {
        // Piecewise linear (pyhf's default for histosys): one coefficient read instead of the
        // four, the same value as the weighted sum below (its other terms are zeros).
        *delta = a > 0.0 ? a * coef4[0] : (a < 0.0 ? a * coef4[1] : 0.0);
        *ddelta = a > 0.0 ? coef4[0] : (a < 0.0 ? coef4[1] : 0.5 * coef4[0] + 0.5 * coef4[1]);
    } else if (is_mult(code)) {
        double c8[8] = {coef4[1], coef4[2], poly6[0], poly6[1], poly6[2], poly6[3], poly6[4], poly6[5]};
        double k, dk;
        multiplicative_value(code, c8, a, &k, &dk);
        *delta = coef4[0] * (k - 1.0);
        *ddelta = coef4[0] * dk;
    } else {
        double w[4], dw[4];
        additive_weights(code, a, w, dw);
        *delta = w[0] * coef4[0] + w[1] * coef4[1] + w[2] * coef4[2] + w[3] * coef4[3];
        *ddelta = dw[0] * coef4[0] + dw[1] * coef4[1] + dw[2] * coef4[2] + dw[3] * coef4[3];
    }
}

struct Tables {
    // dims
    int n_params, n_main, n_aux, n_samples, n_sb, n_ns, n_sf, n_hs, n_bf, n_terms;
    // per sample: bin_start, n_bins, sb_start, sf0, sf1, ns0, ns1, hs0, hs1
    const int* smp;
    const double* nominal;   // n_sb
    const int* sb_sample;    // n_sb
    const int* sb_bin;       // n_sb (main bin)
    const int* bf_off;       // n_sb + 1
    const int* bf_par;       // n_bf
    const int* sf_par;       // n_sf
    const int* sf_sample;    // n_sf
    const int* ns_par;       // n_ns
    const int* ns_code;      // n_ns
    const int* ns_sample;    // n_ns
    const double* ns_coef;   // 8 × n_ns
    const int* hs_par;       // n_hs
    const int* hs_code;      // n_hs
    const int* hs_sample;    // n_hs
    const int* hs_row;       // n_hs (first row)
    const double* hs_coef;   // 4 × rows
    const double* hs_poly;   // 6 × rows
    const int* bin_off;      // n_main + 1
    const int* bin_sb;       // sample-bins of each main bin
    const int* aux_par;      // n_aux
    const int* aux_kind;     // n_aux
    const double* aux_const; // n_aux: σ (Gauss) or τ (Poisson)
    const int* term_off;     // n_params + 1
    const int* term_idx;     // n_terms
    // n_sb: the workspace's nominal yield where a sample's histosys deltas follow input yields
    // (held relative: Δ·y/nominal₀), 0 where they are added as they are.
    const double* nominal0;
    // n_sb: the sample-bins in the order the threads of a block take them in the yields' loop
    // (position p → thread p mod blockDim): by their sample's histosys entries, most first,
    // every other row of 128 reversed, so that each warp's lanes walk lists of like length and
    // each thread about the same number of rows (layout.rs's `yield_order`).
    const int* sb_order;
};

// The factor on a sample-bin's histosys deltas: y/nominal₀ where they are held relative to the
// input yields y (exactly 1 while the nominal table holds the workspace's), else 1.
__device__ __forceinline__ double hs_scale(const Tables& tb, int sb) {
    double n0 = tb.nominal0[sb];
    return n0 != 0.0 ? tb.nominal[sb] / n0 : 1.0;
}

// Term slots: [aux n_aux][normsys n_ns][scale factors n_sf][histosys n_hs][bin factors n_bf].

// Σ v[0..n) in an order that does not depend on the block size: 256 lanes (LANES; the tree
// below is written for 256), lane L adds v[L], v[L+256], … in turn, then a fixed tree over the
// lanes. `red` holds 256 doubles. So a problem's value has the same bits whichever kernel
// (narrow or wide) evaluates it. Needs blockDim.x a multiple of 32.
#define LANES 256
__device__ double fixed_sum(const double* v, int n, double* red) {
    int t = threadIdx.x, T = blockDim.x;
    for (int lane = t; lane < LANES; lane += T) {
        double s = 0.0;
        for (int i = lane; i < n; i += LANES) s += v[i];
        red[lane] = s;
    }
    __syncthreads();
    // The tree over the 256 lanes in the first warp, without a block barrier a level: lane L
    // adds lanes L + 128j to L + 32j (the first level), those in pairs 64 apart (the second),
    // the two it holds (the third), then the last five levels by shuffles — the same additions
    // in the same order as level by level through `red`.
    if (t < 32) {
        const double a0 = red[t] + red[t + 128], a1 = red[t + 32] + red[t + 160];
        const double a2 = red[t + 64] + red[t + 192], a3 = red[t + 96] + red[t + 224];
        double x = (a0 + a2) + (a1 + a3);
        for (int off = 16; off > 0; off >>= 1) x += __shfl_down_sync(0xffffffffu, x, off);
        if (t == 0) red[0] = x;
    }
    __syncthreads();
    double r = red[0];
    __syncthreads();
    return r;
}

// scratch per problem: x[P] kv[ns] kd[ns] F[S] base[sb] binfac[sb] gb[sb] lam[M] dlam[M]
//                      w[S] terms[T] contrib[M + n_aux]
// Dynamic shared memory: max(blockDim.x, 256) doubles for reductions, then (when `scratch` is
// null) the problem's whole scratch, which then never leaves the SM.
// nll_grad_batch: at most 256 threads and at least 8 resident blocks per SM: the register budget
// (≤ 32 per thread) then lets 8 × 132 blocks run at once on an H100, so a batch of 1000 problems
// is one wave instead of one and a half (Nsight Compute: 48 registers limited it to 5 blocks per
// SM). nll_grad_wide: the same body with up to 1024 threads, for launches of a few problems
// (a single fit's evaluations), whose time is one block's latency.
#define NLL_GRAD_ARGS Tables tb, int n_problems, const double* __restrict__ params, \
    const int* __restrict__ data_index, const double* __restrict__ walls, const double* __restrict__ data, double* __restrict__ out_nll, \
    double* __restrict__ out_grad, double* __restrict__ out_lam, double* __restrict__ out_sbfac, \
    double* __restrict__ scratch, long long scratch_len
#define NLL_GRAD_PASS tb, n_problems, params, data_index, walls, data, out_nll, out_grad, out_lam, out_sbfac, \
    scratch, scratch_len

// −ln L (without the dataset's constant) at the parameters in sc[0 .. n_params) against the row
// `dat` (main counts, then auxiliary data), and its gradient into `out_grad` when that is not
// null (expected counts into `out_lam`, ∂λ/∂(nominal yield) into `out_sbfac` when asked). `sc` is
// the problem's scratch (scratch_len doubles, the parameters first), `red` 256 doubles of shared
// memory. Every thread of the block calls it and gets the same value: +inf where the likelihood
// is not defined (the gradient is then NaN). It starts with a barrier, so the caller's writes to
// sc and dat need none.
__device__ __noinline__ double eval_point(const Tables& tb, const double* __restrict__ dat, double* sc, double* red,
                             double* __restrict__ out_grad, double* __restrict__ out_lam,
                             double* __restrict__ out_sbfac, double wall) {
    __shared__ int invalid;
    int t = threadIdx.x, T = blockDim.x;
    const int P = tb.n_params, M = tb.n_main;
    double* x = sc;
    double* kv = x + P;
    double* kd = kv + tb.n_ns;
    double* F = kd + tb.n_ns;
    double* base = F + tb.n_samples;
    double* binfac = base + tb.n_sb;
    double* gb = binfac + tb.n_sb;
    double* lam = gb + tb.n_sb;
    double* dlam = lam + M;
    double* wsamp = dlam + M;
    double* terms = wsamp + tb.n_samples;
    double* contrib = terms + tb.n_terms;
    const double* aux = dat + M;
    // (The previous call's last read of `invalid` and the caller's writes come before this.)
    __syncthreads();
    if (t == 0) invalid = 0;
    // normsys factors
    for (int e = t; e < tb.n_ns; e += T) {
        int code = tb.ns_code[e];
        double a = x[tb.ns_par[e]];
        double v, d;
        normsys_factor(code, tb.ns_coef + 8 * e, a, &v, &d);
        kv[e] = v;
        kd[e] = d;
    }
    // sample-bin yields (nominal + Δ) and bin factors, in sb_order (each sum the same whichever
    // thread makes it)
    for (int p = t; p < tb.n_sb; p += T) {
        const int sb = tb.sb_order[p];
        const int* sm = tb.smp + 9 * tb.sb_sample[sb];
        int k = sb - sm[2];
        double b = tb.nominal[sb];
        double scale = sm[8] > sm[7] ? hs_scale(tb, sb) : 1.0;
        for (int e = sm[7]; e < sm[8]; ++e) {
            int r = tb.hs_row[e] + k;
            double dl, dd;
            histo_row(tb.hs_code[e], tb.hs_coef + 4 * r, tb.hs_poly + 6 * r, x[tb.hs_par[e]], &dl, &dd);
            b += dl * scale;
        }
        base[sb] = b;
        double bf = 1.0;
        for (int j = tb.bf_off[sb]; j < tb.bf_off[sb + 1]; ++j) bf *= x[tb.bf_par[j]];
        binfac[sb] = bf;
    }
    __syncthreads();
    // sample factors
    for (int s = t; s < tb.n_samples; s += T) {
        const int* sm = tb.smp + 9 * s;
        double f = 1.0;
        for (int j = sm[3]; j < sm[4]; ++j) f *= x[tb.sf_par[j]];
        for (int e = sm[5]; e < sm[6]; ++e) f *= kv[e];
        F[s] = f;
    }
    __syncthreads();
    // ∂λ/∂(nominal yield) of every sample-bin: the yields-as-inputs gradients. Histosys deltas
    // held relative to the input add its slope Δ₀/nominal₀ (those held absolute do not depend on
    // it).
    if (out_sbfac)
        for (int sb = t; sb < tb.n_sb; sb += T) {
            double slope = 1.0, n0 = tb.nominal0[sb];
            if (n0 != 0.0) {
                const int* sm = tb.smp + 9 * tb.sb_sample[sb];
                int k = sb - sm[2];
                double d0 = 0.0;
                for (int e = sm[7]; e < sm[8]; ++e) {
                    int r = tb.hs_row[e] + k;
                    double dl, dd;
                    histo_row(tb.hs_code[e], tb.hs_coef + 4 * r, tb.hs_poly + 6 * r, x[tb.hs_par[e]], &dl, &dd);
                    d0 += dl;
                }
                slope += d0 / n0;
            }
            out_sbfac[sb] = binfac[sb] * F[tb.sb_sample[sb]] * slope;
        }
    // expected counts, Poisson terms, ∂NLL/∂λ
    for (int b = t; b < M; b += T) {
        double l = 0.0;
        for (int j = tb.bin_off[b]; j < tb.bin_off[b + 1]; ++j) {
            int sb = tb.bin_sb[j];
            l += base[sb] * binfac[sb] * F[tb.sb_sample[sb]];
        }
        lam[b] = l;
        if (out_lam) out_lam[b] = l;
        double n = dat[b];
        if ((n > 0.0 && !(l > 0.0)) || isnan(l)) {
            invalid = 1;
            dlam[b] = 0.0;
            contrib[b] = 0.0;
        } else if (n > 0.0) {
            contrib[b] = l - n - n * log(l / n);
            dlam[b] = 1.0 - n / l;
        } else if (l >= 0.0) {
            contrib[b] = l;
            dlam[b] = 1.0;
        } else {
            // An empty bin below λ = 0 (histfit_compute::EMPTY_BIN_WALL; `wall` its width,
            // Dataset::empty_bin_wall).
            contrib[b] = l + l * l / (2.0 * wall);
            dlam[b] = 1.0 + l / wall;
        }
    }
    // constraint terms
    for (int k = t; k < tb.n_aux; k += T) {
        int par = tb.aux_par[k];
        double xv = x[par], a = aux[k], c = tb.aux_const[k];
        double g = 0.0, v = 0.0;
        if (tb.aux_kind[k] == KIND_GAUSS) {
            double z = (xv - a) / c;
            v = 0.5 * z * z;
            g = (xv - a) / (c * c);
        } else if (tb.aux_kind[k] == KIND_POISSON) {
            double rate = xv * c;
            if (rate < 0.0 || (rate == 0.0 && a > 0.0)) {
                invalid = 1;
            } else if (a > 0.0) {
                // histfit_seam::poisson_constraint: a (r - 1 - ln r), r = x/hat, hat = a/c (near
                // r = 1 as e - ln(1 + e), e = (x - hat)/hat), not rate - a - a ln(rate/a), which
                // rounds rate - a at c = 1e12 to 1e-4
                double hat = a / c, r = xv / hat, e = (xv - hat) / hat;
                v = a * (fabs(e) < 0.5 ? e - log1p(e) : r - 1.0 - log(r));
                g = a / hat * e / r;
            } else {
                v = rate;
                g = c;
            }
        }
        terms[k] = g;
        contrib[M + k] = v;
    }
    __syncthreads();
    double nll = fixed_sum(contrib, M + tb.n_aux, red); // invalid and dlam are visible after it
    if (invalid) {
        if (out_grad)
            for (int i = t; i < P; i += T) out_grad[i] = 0.0 / 0.0;
        return 1.0 / 0.0;
    }
    if (!out_grad) return nll;
    const int t_ns = tb.n_aux, t_sf = t_ns + tb.n_ns, t_hs = t_sf + tb.n_sf, t_bf = t_hs + tb.n_hs;
    // per sample-bin: ∂NLL/∂base without F (times the factor on its histosys deltas, which only
    // the histosys terms read); bin-factor terms
    for (int sb = t; sb < tb.n_sb; sb += T) {
        int s = tb.sb_sample[sb];
        double dl = dlam[tb.sb_bin[sb]];
        const int* sm = tb.smp + 9 * s;
        gb[sb] = dl * binfac[sb] * (sm[8] > sm[7] ? hs_scale(tb, sb) : 1.0);
        double common = dl * base[sb] * F[s];
        int j0 = tb.bf_off[sb], j1 = tb.bf_off[sb + 1];
        for (int j = j0; j < j1; ++j) {
            double others = 1.0;
            for (int q = j0; q < j1; ++q)
                if (q != j) others *= x[tb.bf_par[q]];
            terms[t_bf + j] = common * others;
        }
    }
    // per sample: ∂NLL/∂F
    for (int s = t; s < tb.n_samples; s += T) {
        const int* sm = tb.smp + 9 * s;
        double w = 0.0;
        for (int k = 0; k < sm[1]; ++k) {
            int sb = sm[2] + k;
            w += dlam[sm[0] + k] * base[sb] * binfac[sb];
        }
        wsamp[s] = w;
    }
    __syncthreads();
    // normsys and scale-factor terms: ∂F/∂factor = product of the sample's other factors. A
    // normsys entry's is F/κ, as the CPU evaluator takes it (one division instead of a product
    // over the sample's other entries: a sample of tHu carries up to 48, and the products were
    // a fifth of the resident fits' time); the product itself where F or κ is zero or
    // subnormal, or the quotient not finite.
    for (int e = t; e < tb.n_ns; e += T) {
        int s = tb.ns_sample[e];
        double others = F[s] / kv[e];
        if (!(fabs(F[s]) >= 2.2250738585072014e-308 && fabs(kv[e]) >= 2.2250738585072014e-308 &&
              isfinite(others))) {
            const int* sm = tb.smp + 9 * s;
            others = 1.0;
            for (int j = sm[3]; j < sm[4]; ++j) others *= x[tb.sf_par[j]];
            for (int q = sm[5]; q < sm[6]; ++q)
                if (q != e) others *= kv[q];
        }
        terms[t_ns + e] = wsamp[s] * others * kd[e];
    }
    for (int j = t; j < tb.n_sf; j += T) {
        int s = tb.sf_sample[j];
        const int* sm = tb.smp + 9 * s;
        double others = 1.0;
        for (int q = sm[3]; q < sm[4]; ++q)
            if (q != j) others *= x[tb.sf_par[q]];
        for (int q = sm[5]; q < sm[6]; ++q) others *= kv[q];
        terms[t_sf + j] = wsamp[s] * others;
    }
    // histosys terms
    for (int e = t; e < tb.n_hs; e += T) {
        int s = tb.hs_sample[e];
        const int* sm = tb.smp + 9 * s;
        double a = x[tb.hs_par[e]];
        const int code = tb.hs_code[e], r0 = tb.hs_row[e], nb = sm[1], sb0 = sm[2];
        double g = 0.0;
        if (is_mult(code)) {
            for (int k = 0; k < nb; ++k) {
                int r = r0 + k;
                double dl, dd;
                histo_row(code, tb.hs_coef + 4 * r, tb.hs_poly + 6 * r, a, &dl, &dd);
                g += gb[sb0 + k] * dd;
            }
        } else if (code == CODE0 && (a > 0.0 || a < 0.0)) {
            // Piecewise linear off its kink: the slope is one coefficient of each row (the
            // weighted sum below, whose other terms are zeros), read alone. (At the kink, or at
            // a NaN, the sum below, as before.)
            const double* c = tb.hs_coef + (a > 0.0 ? 0 : 1);
            for (int k = 0; k < nb; ++k) g += gb[sb0 + k] * c[4 * (r0 + k)];
        } else {
            // (The weights' derivatives depend on α alone: once per entry, not per row.)
            double w[4], dw[4];
            additive_weights(code, a, w, dw);
            for (int k = 0; k < nb; ++k) {
                const double* c = tb.hs_coef + 4 * (r0 + k);
                double dd = dw[0] * c[0] + dw[1] * c[1] + dw[2] * c[2] + dw[3] * c[3];
                g += gb[sb0 + k] * dd;
            }
        }
        terms[t_hs + e] = g * F[s];
    }
    __syncthreads();
    for (int i = t; i < P; i += T) {
        double g = 0.0;
        for (int j = tb.term_off[i]; j < tb.term_off[i + 1]; ++j) g += terms[tb.term_idx[j]];
        out_grad[i] = g;
    }
    return nll;
}

__device__ __forceinline__ void nll_grad_body(NLL_GRAD_ARGS) {
    extern __shared__ double smem[];
    int p = blockIdx.x;
    if (p >= n_problems) return;
    int t = threadIdx.x, T = blockDim.x;
    const int P = tb.n_params, M = tb.n_main;
    double* sc = scratch ? scratch + (long long)p * scratch_len : smem + (T > LANES ? T : LANES);
    for (int i = t; i < P; i += T) sc[i] = params[(long long)p * P + i];
    const double* dat = data + (long long)data_index[p] * (M + tb.n_aux);
    double nll = eval_point(tb, dat, sc, smem, out_grad ? out_grad + (long long)p * P : nullptr,
                            out_lam ? out_lam + (long long)p * M : nullptr,
                            out_sbfac ? out_sbfac + (long long)p * tb.n_sb : nullptr,
                            walls ? walls[p] : EMPTY_BIN_WALL);
    if (t == 0) out_nll[p] = nll;
}

extern "C" __global__ void __launch_bounds__(256, 8) nll_grad_batch(NLL_GRAD_ARGS) {
    nll_grad_body(NLL_GRAD_PASS);
}

extern "C" __global__ void __launch_bounds__(1024, 1) nll_grad_wide(NLL_GRAD_ARGS) {
    nll_grad_body(NLL_GRAD_PASS);
}

// ---------------------------------------------------------------------------------------------
// Yields as inputs (histfit-compute's yields.rs), for yields that live in device memory.

// The gradient of a profiled statistic with respect to the input sample-bins in_sb[j]:
// out[j] = Σ_{i<k} c_i ∂(−ln L)/∂y at problem i + cd ln(λ_b(i_f)/λ_b(i_c)) ∂λ_b/∂y at i_at,
// with ∂(−ln L)/∂y_sb = (1 − n_b/λ_b)·sbfac_sb (sbfac alone where n_b = 0). lam and sbfac are
// the rows nll_grad_batch just wrote for those problems; k ≤ 2; `wall` the dataset's empty-bin
// wall (Dataset::empty_bin_wall).
extern "C" __global__ void yield_grad_sum(int n_in, const int* __restrict__ in_sb, const int* __restrict__ sb_bin,
                                          int M, int n_sb, double wall, const double* __restrict__ data_main,
                                          const double* __restrict__ lam, const double* __restrict__ sbfac,
                                          int k, double c0, double c1, double cd, int i_f, int i_c, int i_at,
                                          double* __restrict__ out) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n_in) return;
    int sb = in_sb[j], b = sb_bin[sb];
    double n = data_main[b];
    double g = 0.0;
    for (int i = 0; i < k; ++i) {
        double l = lam[(long long)i * M + b];
        double dl = n > 0.0 ? 1.0 - n / l : (l >= 0.0 ? 1.0 : 1.0 + l / wall);
        g += (i == 0 ? c0 : c1) * (dl * sbfac[(long long)i * n_sb + sb]);
    }
    if (cd != 0.0) {
        double lf = lam[(long long)i_f * M + b], lc = lam[(long long)i_c * M + b];
        if (lf > 0.0 && lc > 0.0) g += cd * log(lf / lc) * sbfac[(long long)i_at * n_sb + sb];
    }
    out[j] = g;
}

// The rules of set_yields for yields copied into the nominal table (the model's own yields pass
// them): every value finite, and no main bin with a negative total nominal yield. flag[0]
// (preset to INT_MAX) takes the smallest failing key: sample-bin sb non-finite → sb, main bin b
// with a negative total → n_sb + b (the host names the input sample in that bin).
extern "C" __global__ void check_yields(Tables tb, int* flag) {
    int sb = blockIdx.x * blockDim.x + threadIdx.x;
    if (sb >= tb.n_sb) return;
    double y = tb.nominal[sb];
    int b = tb.sb_bin[sb];
    double total = 0.0;
    for (int j = tb.bin_off[b]; j < tb.bin_off[b + 1]; ++j) total += tb.nominal[tb.bin_sb[j]];
    if (!isfinite(y)) atomicMin(flag, sb);
    else if (total < 0.0) atomicMin(flag, tb.n_sb + b);
}

// The part of −ln L of one count n that depends on the data alone (Dataset::constant):
// ln Γ(n + 1) + n − n ln n; from STIRLING_FROM on Stirling's series, as
// histfit_seam::count_constant.
__device__ __forceinline__ double count_constant(double n) {
    if (n >= STIRLING_FROM) {
        double r = 1.0 / n, r2 = r * r;
        return 0.5 * log(2.0 * 3.141592653589793 * n) + r * (1.0 / 12.0 - r2 * (1.0 / 360.0 - r2 / 1260.0));
    }
    return lgamma(n + 1.0) + (n > 0.0 ? n - n * log(n) : 0.0);
}

// Σ_b count_constant(n_b) over the main counts at `main` (Dataset::constant's main part), for a
// dataset made on the device, into out[0]; into out[1] 1 where a count is 0, else 0
// (Dataset::has_empty_main_bin). One block.
extern "C" __global__ void main_constant(const double* __restrict__ main, int n, double* __restrict__ out) {
    __shared__ double red[LANES];
    __shared__ double v[1024];
    __shared__ int empty;
    if (threadIdx.x == 0) empty = 0;
    __syncthreads();
    double s = 0.0;
    for (int b0 = 0; b0 < n; b0 += 1024) {
        int m = n - b0 < 1024 ? n - b0 : 1024;
        for (int i = threadIdx.x; i < m; i += blockDim.x) {
            double x = main[b0 + i];
            v[i] = count_constant(x);
            if (x == 0.0) empty = 1;
        }
        __syncthreads();
        s += fixed_sum(v, m, red);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        out[0] = s;
        out[1] = empty ? 1.0 : 0.0;
    }
}

// ---------------------------------------------------------------------------------------------
// Toys: the generator of rng.rs.

__device__ void philox(u32 ctr[4], u32 key0, u32 key1, u32 out[4]) {
    u32 c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    u32 k0 = key0, k1 = key1;
    for (int round = 0; round < 10; ++round) {
        if (round > 0) { k0 += PH_W0; k1 += PH_W1; }
        u64 p0 = (u64)PH_M0 * (u64)c0;
        u64 p1 = (u64)PH_M1 * (u64)c2;
        u32 hi0 = (u32)(p0 >> 32), lo0 = (u32)p0;
        u32 hi1 = (u32)(p1 >> 32), lo1 = (u32)p1;
        u32 n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

struct Stream {
    u32 key0, key1;
    u32 ctr[4];
    u32 buf[4];
    int used;
};

__device__ void stream_init(Stream* s, u64 seed, u64 toy, u32 stream) {
    s->key0 = (u32)seed; s->key1 = (u32)(seed >> 32);
    s->ctr[0] = (u32)toy; s->ctr[1] = (u32)(toy >> 32); s->ctr[2] = stream; s->ctr[3] = 0;
    s->used = 4;
}

__device__ u32 next_u32(Stream* s) {
    if (s->used == 4) {
        philox(s->ctr, s->key0, s->key1, s->buf);
        s->ctr[3] += 1u;
        s->used = 0;
    }
    s->used += 1;
    return s->buf[s->used - 1];
}

__device__ double uniform01(Stream* s) {
    u64 a = (u64)(next_u32(s) >> 5);
    u64 b = (u64)(next_u32(s) >> 6);
    return ((double)((a << 26) | b) + 0.5) * (1.0 / 9007199254740992.0);
}

__device__ double portable_ln(double x) {
    long long bits = __double_as_longlong(x);
    long long e = ((bits >> 52) & 0x7ff) - 1023;
    double m = __longlong_as_double((bits & 0x000fffffffffffffLL) | 0x3ff0000000000000LL);
    if (m > 1.4142135623730951) { m *= 0.5; e += 1; }
    double f = m - 1.0;
    double s = f / (2.0 + f);
    double z = s * s;
    double poly = 1.0 / 23.0;
    for (int k = 10; k >= 0; --k) poly = poly * z + 1.0 / (double)(2 * k + 1);
    double ed = (double)e;
    return ed * LN2_HI + (ed * LN2_LO + 2.0 * s * poly);
}

__device__ double portable_exp(double x) {
    double k = floor(x * 1.4426950408889634 + 0.5);
    double r = (x - k * LN2_HI) - k * LN2_LO;
    double p = 1.0 / 6227020800.0;
    double fact = 6227020800.0;
    for (int n = 12; n >= 1; --n) {
        fact /= (double)(n + 1);
        p = p * r + 1.0 / fact;
    }
    double er = p * r + 1.0;
    return er * __longlong_as_double(((long long)k + 1023LL) << 52);
}

__device__ double ln_factorial(double k) {
    if (k < 18.0) {
        double f = 1.0, i = 2.0;
        while (i <= k) { f *= i; i += 1.0; }
        return portable_ln(f);
    }
    double z = k + 1.0;
    double iz = 1.0 / z;
    double iz2 = iz * iz;
    double series = iz * (1.0 / 12.0 - iz2 * (1.0 / 360.0 - iz2 * (1.0 / 1260.0 - iz2 / 1680.0)));
    return (z - 0.5) * portable_ln(z) - z + 0.9189385332046728 + series;
}

__device__ double normal01(Stream* s) {
    for (;;) {
        double v1 = 2.0 * uniform01(s) - 1.0;
        double v2 = 2.0 * uniform01(s) - 1.0;
        double q = v1 * v1 + v2 * v2;
        if (q < 1.0 && q > 0.0) return v1 * sqrt(-2.0 * portable_ln(q) / q);
    }
}

__device__ double poisson(Stream* s, double lam) {
    if (lam <= 0.0) return 0.0;
    if (lam < POISSON_INVERSION_BELOW) {
        double u = uniform01(s);
        double k = 0.0;
        double p = portable_exp(-lam);
        double cdf = p;
        while (u > cdf && k < POISSON_INVERSION_MAX_K) {
            k += 1.0;
            p *= lam / k;
            cdf += p;
        }
        return k;
    }
    double slam = sqrt(lam);
    double loglam = portable_ln(lam);
    double b = 0.931 + 2.53 * slam;
    double a = -0.059 + 0.02483 * b;
    double inv_alpha = 1.1239 + 1.1328 / (b - 3.4);
    double vr = 0.9277 - 3.6224 / (b - 2.0);
    for (;;) {
        double u = uniform01(s) - 0.5;
        double v = uniform01(s);
        double us = 0.5 - fabs(u);
        double k = floor((2.0 * a / us + b) * u + lam + 0.43);
        if (us >= 0.07 && v <= vr) return k;
        if (k < 0.0 || (us < 0.013 && v > us)) continue;
        if (portable_ln(v) + portable_ln(inv_alpha) - portable_ln(a / (us * us) + b)
            <= -lam + k * loglam - ln_factorial(k))
            return k;
    }
}

// Toy `toy` of `seed` into `o` (main bins, then auxiliary data): main bins Poisson(λ_b) from
// stream 0; aux data from stream 1: Gauss θ + σ·z, Poisson Poisson(θ·τ) (rate given).
__device__ void draw_toy(u64 seed, u64 toy, int n_main, int n_aux, const double* __restrict__ lam_main,
                         const int* __restrict__ aux_kind, const double* __restrict__ aux_center,
                         const double* __restrict__ aux_sigma, double* __restrict__ o) {
    Stream s;
    stream_init(&s, seed, toy, STREAM_MAIN);
    for (int b = 0; b < n_main; ++b) {
        double l = lam_main[b];
        o[b] = poisson(&s, l > 0.0 ? l : 0.0);
    }
    stream_init(&s, seed, toy, STREAM_AUX);
    for (int k = 0; k < n_aux; ++k) {
        if (aux_kind[k] == KIND_GAUSS) o[n_main + k] = aux_center[k] + aux_sigma[k] * normal01(&s);
        else o[n_main + k] = poisson(&s, aux_center[k]);
    }
}

// Toys first .. first + count of `seed`, one thread per toy.
extern "C" __global__ void generate_toys(u64 seed, u64 first, int count, int n_main, int n_aux,
                                         const double* __restrict__ lam_main,
                                         const int* __restrict__ aux_kind,
                                         const double* __restrict__ aux_center,
                                         const double* __restrict__ aux_sigma,
                                         double* __restrict__ out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    draw_toy(seed, first + (u64)i, n_main, n_aux, lam_main, aux_kind, aux_center, aux_sigma,
             out + (long long)i * (n_main + n_aux));
}

// ---------------------------------------------------------------------------------------------
// Fits resident on the device (histfit-cuda's resident.rs): each block draws a toy and fits it
// from start to end, then takes the next toy, so an ensemble is one launch and only per-toy
// results leave the device.
//
// The fit is the host's, ported: L-BFGS-B (histfit-optim's lbfgsb.rs — generalized Cauchy point,
// subspace minimisation, strong Wolfe line search with cubic zoom, a pair kept only where
// sᵀy > ε yᵀy, converged on the projected gradient, the relative reduction of f or the model's
// predicted decrease) in the scaled coordinates z = θ/s of histfit-infer's fit/problem.rs (fixed
// parameters: lower = upper, gradient 0), then the fit's finish (polish.rs). Scalars are computed
// by every thread alike from block reductions, so control flow is uniform and a toy's fit does not
// depend on which block runs it. The block has a fixed size (resident.rs's FIT_THREADS): the
// reductions' order, and so the results' last bits, depend on it.

// Sum over the block of one value per thread, in a fixed order (warps, then warp sums in turn):
// every thread gets the same bits. Needs blockDim.x a multiple of 32, at most 256.
__device__ double block_sum(double v, double* red) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    int t = threadIdx.x;
    if ((t & 31) == 0) red[t >> 5] = v;
    __syncthreads();
    double r = 0.0;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) r += red[w];
    __syncthreads();
    return r;
}

// NaN-propagating maximum (a NaN anywhere makes the result NaN).
__device__ __forceinline__ double nan_max(double a, double b) { return (b > a || b != b) ? b : a; }

__device__ double block_max(double v, double* red) {
    for (int off = 16; off > 0; off >>= 1) v = nan_max(v, __shfl_down_sync(0xffffffffu, v, off));
    int t = threadIdx.x;
    if ((t & 31) == 0) red[t >> 5] = v;
    __syncthreads();
    double r = red[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); ++w) r = nan_max(r, red[w]);
    __syncthreads();
    return r;
}

__device__ double block_min(double v, double* red) { return -block_max(-v, red); }

// Two or three reductions of the block with one pair of barriers (each value by the same
// operations as block_sum's or block_max's alone, so the same bits): the descent's paired
// sums and bounds, the fast path's and the certificate's maxima. `red` holds 3 × 32 doubles.
__device__ void block_sum2(double& a, double& b, double* red) {
    for (int off = 16; off > 0; off >>= 1) {
        a += __shfl_down_sync(0xffffffffu, a, off);
        b += __shfl_down_sync(0xffffffffu, b, off);
    }
    const int t = threadIdx.x, W = blockDim.x >> 5;
    if ((t & 31) == 0) {
        red[t >> 5] = a;
        red[32 + (t >> 5)] = b;
    }
    __syncthreads();
    double ra = 0.0, rb = 0.0;
    for (int w = 0; w < W; ++w) {
        ra += red[w];
        rb += red[32 + w];
    }
    __syncthreads();
    a = ra;
    b = rb;
}

__device__ void block_max3(double& a, double& b, double& c, double* red) {
    for (int off = 16; off > 0; off >>= 1) {
        a = nan_max(a, __shfl_down_sync(0xffffffffu, a, off));
        b = nan_max(b, __shfl_down_sync(0xffffffffu, b, off));
        c = nan_max(c, __shfl_down_sync(0xffffffffu, c, off));
    }
    const int t = threadIdx.x, W = blockDim.x >> 5;
    if ((t & 31) == 0) {
        red[t >> 5] = a;
        red[32 + (t >> 5)] = b;
        red[64 + (t >> 5)] = c;
    }
    __syncthreads();
    double ra = red[0], rb = red[32], rc = red[64];
    for (int w = 1; w < W; ++w) {
        ra = nan_max(ra, red[w]);
        rb = nan_max(rb, red[32 + w]);
        rc = nan_max(rc, red[64 + w]);
    }
    __syncthreads();
    a = ra;
    b = rb;
    c = rc;
}

// Two maxima (the third lane of block_max3 idle).
__device__ void block_max2(double& a, double& b, double* red) {
    double c = 0.0;
    block_max3(a, b, c, red);
}

// Σ a_i b_i over i < n (element i read by thread i mod blockDim.x).
__device__ double block_dot(const double* a, const double* b, int n, double* red) {
    double s = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += a[i] * b[i];
    return block_sum(s, red);
}

struct FitArgs {
    u64 seed, first;
    int count, poi, memory, max_iterations, max_evaluations, want_x;
    // Descents (fit_runs): the number of values per dataset row (main counts, then auxiliary
    // data). Toy fits: the most evaluations one whole fit makes (its descents stop there and
    // the fit goes back to the host: a launch lasts as long as its slowest fit).
    int row_len, fit_evaluations;
    double pgtol, ftol, edm, c1, c2, gauss_const, certify, polish_pg;
    const double* lam_main;   // expected main counts at the generating point (M)
    const int* aux_kind;      // generation: constraint kind of each auxiliary datum
    const double* aux_center; // generation: θ (Gauss) or θ·τ (Poisson)
    const double* aux_sigma;  // generation: σ (Gauss)
    const double* z_init;     // start, scaled (fixed parameters: their value, scale 1)
    const double* z_lo;       // bounds, scaled (fixed: lower = upper)
    const double* z_hi;
    const double* scale;      // θ = z·scale
    const int* kink;          // 1 where −ln L has a kink at θ = 0
    double* state;            // per block: state_len doubles
    double* scratch;          // per block: scratch_len doubles
    int* next_toy;            // work counter (0 at launch)
    double* out;              // per toy: FIT_OUT values
    double* out_x;            // per toy: the fitted parameters (when want_x)
    const double* z_model;    // the fallback start where −ln L is not finite at z_init (scaled)
    const double* z_starts;   // per toy of the launch: its own start in place of z_init (or null)
    const u64* toy_list;      // per toy of the launch: its index (or null: first + k)
    // Descents (fit_runs). The fits they belong to (`spaces`, 5 n values each over the whole
    // parameter vector: the held parameters' values, the scales, the fit's lower and upper
    // bounds, 1 where held); per descent its start (n values; a held parameter's is not read),
    // its codes (n bytes: RUN_LOWER_0, RUN_UPPER_0 where that bound is 0 instead of the fit's,
    // RUN_SIDE_UP, RUN_SIDE_DOWN for a coordinate kept to that side of its kink, evaluated
    // there at 0), its RUN_RULE values (the watched coordinate or −1, the ceiling, the first
    // iteration watched, the EDM factor, the iterations held, the restarts, the dataset row,
    // the empty-bin wall, the dataset's constant, its fit in `spaces`); the dataset rows.
    const double* run_z;
    const double* spaces;
    const unsigned char* run_code;
    const double* unused_ptr;
    const double* run_rule;
    const double* rows;
    // Per block: doubles of state, of scratch, and where in the state S (then Y), the Small
    // area and the toy's row begin (resident.rs lays the state out).
    long long state_len, scratch_len, s_off, small_off, row_off;
};

struct Trial {
    double a, f, dg;
};

// The next trial inside [lo, hi]: a cubic through both ends, else a quadratic, kept within
// 1–90 % of the interval (lbfgsb.rs's `interpolate`).
__device__ double zoom_step(Trial lo, Trial hi) {
    double a = lo.a, b = hi.a;
    double x = 0.0 / 0.0;
    if (isfinite(lo.f) && isfinite(hi.f) && isfinite(hi.dg)) {
        double d1 = lo.dg + hi.dg - 3.0 * (lo.f - hi.f) / (a - b);
        double disc = d1 * d1 - lo.dg * hi.dg;
        if (disc >= 0.0) {
            double d2 = (b - a > 0.0 ? 1.0 : -1.0) * sqrt(disc);
            x = b - (b - a) * (hi.dg + d2 - d1) / (hi.dg - lo.dg + 2.0 * d2);
        }
    }
    if (!isfinite(x) && isfinite(lo.f) && isfinite(hi.f)) {
        double h = b - a;
        double curvature = hi.f - lo.f - lo.dg * h;
        if (curvature > 0.0) x = a - lo.dg * h * h / (2.0 * curvature);
    }
    double t;
    if (isfinite(x)) t = fmin(fmax((x - a) / (b - a), 0.01), 0.9);
    else if (isfinite(hi.f)) t = 0.5;
    else t = 0.1;
    return a + t * (b - a);
}

// f and ∇_z f at z (the gradient into g). The gradient of a fixed coordinate is 0: it never
// moves, and its component in the curvature pairs (y = Δg with s = 0) would corrupt the
// quasi-Newton model of the others (θ = yᵀy/sᵀy above all) — sixfold the iterations on tHu.
// In a descent (`side` not null) a coordinate with side ±1 exactly at 0 is evaluated at ±1e-150:
// the slope of that side of its kink (descent.rs); those with side 2 are the ones held.
__device__ double eval_z(const Tables& tb, const FitArgs& A, const double* z, double* g, const double* row,
                         double* sc, double* red, double wall, const double* side = nullptr) {
    int t = threadIdx.x, T = blockDim.x;
    for (int i = t; i < tb.n_params; i += T) {
        double v = z[i] * A.scale[i];
        if (side && z[i] == 0.0 && (side[i] == 1.0 || side[i] == -1.0)) v = side[i] * 1e-150;
        sc[i] = v;
    }
    double f = eval_point(tb, row, sc, red, g, nullptr, nullptr, wall);
    for (int i = t; i < tb.n_params; i += T) {
        bool held = side ? side[i] == 2.0 : A.z_lo[i] == A.z_hi[i];
        g[i] = held ? 0.0 : g[i] * A.scale[i];
    }
    return f;
}

// ‖P(z − g) − z‖∞ within lo..hi, NaN where a gradient component is not finite.
__device__ double projected_gradient(const double* lo, const double* hi, const double* z, const double* g, int n,
                                     double* red) {
    double m = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        double v = isfinite(g[i]) ? fabs(fmin(fmax(z[i] - g[i], lo[i]), hi[i]) - z[i]) : 0.0 / 0.0;
        m = nan_max(m, v);
    }
    return block_max(m, red);
}

// ---- The L-BFGS-B direction (histfit-optim's lbfgsb.rs, `direction`), ported step for step:
// the generalized Cauchy point along the projected steepest descent path, then the minimisation
// of the quadratic model over the coordinates free there (x − H·g where every coordinate is
// free), projected into the box. The limited memory is the compact form B = θI − W M Wᵀ with
// W = [Y, θS]. n-vectors are spread over the block. The k×k and 2k×2k algebra (k ≤ 16 pairs:
// resident.rs's MAX_MEMORY) in the block's `Small` area — M's construction, the subspace step's
// inverse, the Cauchy point's breakpoints — runs on the first warp, its lanes taking the
// entries and lane 0 the few scalar steps, while the other warps wait at a block barrier; the
// rest is spread over the block, its scalar steps on thread 0 published by a barrier.

struct Small {
    double *sts, *sty, *yty;          // m×m each, stride m, logical pair order (oldest first)
    double *mm;                       // 2k×2k, stride 2k
    double *p, *c, *mp, *mc, *mw, *wrow, *v, *mv, *sol, *dinv; // 2m (dinv: m)
    double *scm, *sci, *gm;           // m×m work (stride k)
    double *wzw, *nm, *ni;            // 2k×2k work
    double *scal;                     // scalars handed from thread 0 to the block
};

__device__ Small small_of(double* base, int m) {
    Small q;
    int m2 = 2 * m;
    q.sts = base; q.sty = q.sts + m * m; q.yty = q.sty + m * m;
    q.mm = q.yty + m * m;
    q.p = q.mm + m2 * m2; q.c = q.p + m2; q.mp = q.c + m2; q.mc = q.mp + m2; q.mw = q.mc + m2;
    q.wrow = q.mw + m2; q.v = q.wrow + m2; q.mv = q.v + m2; q.sol = q.mv + m2; q.dinv = q.sol + m2;
    q.scm = q.dinv + m; q.sci = q.scm + m * m; q.gm = q.sci + m * m;
    q.wzw = q.gm + m * m; q.nm = q.wzw + m2 * m2; q.ni = q.nm + m2 * m2;
    q.scal = q.ni + m2 * m2;
    return q;
}

// (Its length, 22m² + 19m + 16 doubles, is resident.rs's `small_len`.)

// The pairs in logical order: pair j (0 = oldest) of k lives in ring slot (head − k + j) mod m.
__device__ __forceinline__ int slot_of(int j, int k, int head, int m) { return (head - k + j + 2 * m) % m; }

// out[j] = Y_j·v, out[k + j] = θ S_j·v (j < k): one barrier for all 2k sums.
__device__ void wt_times(const double* S, const double* Y, int k, int head, int m, int P, double theta,
                         const double* v, double* out, double* red) {
    int t = threadIdx.x, T = blockDim.x, W = T >> 5;
    for (int q = 0; q < 2 * k; ++q) {
        int j = q < k ? q : q - k;
        const double* a = (q < k ? Y : S) + (long long)slot_of(j, k, head, m) * P;
        double s = 0.0;
        for (int i = t; i < P; i += T) s += a[i] * v[i];
        for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
        if ((t & 31) == 0) red[q * W + (t >> 5)] = s;
    }
    __syncthreads();
    if (t < 2 * k) {
        double r = 0.0;
        for (int w = 0; w < W; ++w) r += red[t * W + w];
        out[t] = t < k ? r : theta * r;
    }
    __syncthreads();
}

// (W·a)_i for one coordinate i.
__device__ __forceinline__ double w_times_at(const double* S, const double* Y, int k, int head, int m, int P,
                                             double theta, const double* a, int i) {
    double r = 0.0;
    for (int j = 0; j < k; ++j) {
        long long o = (long long)slot_of(j, k, head, m) * P + i;
        r += a[j] * Y[o] + theta * a[k + j] * S[o];
    }
    return r;
}

// out = M·v (2k), one row per thread of the first `lanes` (the block, or the first warp for its
// own steps), without a barrier. `out` must not be `v`.
__device__ void m_rows(const Small& q, int k, const double* v, double* out, int lanes) {
    int n2 = 2 * k;
    for (int i = threadIdx.x; i < n2; i += lanes) {
        double r = 0.0;
        for (int j = 0; j < n2; ++j) r += q.mm[i * n2 + j] * v[j];
        out[i] = r;
    }
}

// out = M·v (2k) over the block; ends with a barrier.
__device__ void m_times(const Small& q, int k, const double* v, double* out) {
    m_rows(q, k, v, out, blockDim.x);
    __syncthreads();
}

// M = [[−D, Lᵀ], [L, θSᵀS]]⁻¹ by block elimination through the Schur complement
// Sc = θSᵀS + L D⁻¹ Lᵀ (lbfgsb.rs's build_m); false (every thread alike) where Sc is not
// positive definite. k ≤ 16: the first warp computes it alone, the entries spread over its
// lanes, with warp barriers between the steps (spread over the block it took a block barrier
// for each of Sc's columns); each entry by the same operations, so the same bits.
__device__ bool build_m(const Small& q, int k, int m, double theta) {
    __shared__ int s_bad;
    const unsigned full = 0xffffffffu;
    const int t = threadIdx.x, T = 32, n2 = 2 * k;
    if (t < 32) {
        int bad = 0;
        for (int i = t; i < k; i += T) {
            double d = 1.0 / q.sty[i * m + i];
            if (!isfinite(d) || d <= 0.0) bad = 1;
            q.dinv[i] = d;
        }
        bad = __any_sync(full, bad);
        __syncwarp();
        // L_ij = s_i·y_j for i > j.
#define LL(i, j) ((i) > (j) ? q.sty[(i) * m + (j)] : 0.0)
        if (!bad) {
            for (int e = t; e < k * k; e += T) {
                int i = e / k, j = e % k;
                if (j > i) continue;
                double v = theta * q.sts[i * m + j];
                for (int r = 0; r < j; ++r) v += LL(i, r) * q.dinv[r] * LL(j, r);
                q.scm[i * k + j] = v;
                q.scm[j * k + i] = v;
            }
            __syncwarp();
        }
        // Cholesky factor of Sc (in gm), column by column (linalg.rs's cholesky).
        double* l = q.gm;
        for (int j = 0; j < k && !bad; ++j) {
            if (t == 0) {
                double d = q.scm[j * k + j];
                for (int r = 0; r < j; ++r) d -= l[j * k + r] * l[j * k + r];
                if (d <= 0.0 || !isfinite(d)) bad = 1;
                else l[j * k + j] = sqrt(d);
            }
            bad = __shfl_sync(full, bad, 0);
            __syncwarp();
            if (bad) break;
            for (int i = j + 1 + t; i < k; i += T) {
                double s = q.scm[i * k + j];
                for (int r = 0; r < j; ++r) s -= l[i * k + r] * l[j * k + r];
                l[i * k + j] = s / l[j * k + j];
            }
            for (int i = t; i < j; i += T) l[i * k + j] = 0.0;
            __syncwarp();
        }
        if (!bad) {
            // L⁻¹ (in nm), one column per lane; then Sc⁻¹ = L⁻ᵀ L⁻¹ (in sci).
            double* linv = q.nm;
            for (int j = t; j < k; j += T)
                for (int i = 0; i < k; ++i) {
                    if (i < j) {
                        linv[i * k + j] = 0.0;
                    } else if (i == j) {
                        linv[i * k + i] = 1.0 / l[i * k + i];
                    } else {
                        double s = 0.0;
                        for (int r = j; r < i; ++r) s -= l[i * k + r] * linv[r * k + j];
                        linv[i * k + j] = s / l[i * k + i];
                    }
                }
            __syncwarp();
            for (int e = t; e < k * k; e += T) {
                int i = e / k, j = e % k;
                if (j > i) continue;
                double s = 0.0;
                for (int r = i; r < k; ++r) s += linv[r * k + i] * linv[r * k + j];
                q.sci[i * k + j] = s;
                q.sci[j * k + i] = s;
            }
            __syncwarp();
            // G = Sc⁻¹ L D⁻¹ (in gm), then M.
            for (int e = t; e < k * k; e += T) {
                int i = e / k, j = e % k;
                double v = 0.0;
                for (int r = j + 1; r < k; ++r) v += q.sci[i * k + r] * LL(r, j);
                q.gm[i * k + j] = v * q.dinv[j];
            }
            __syncwarp();
            for (int e = t; e < k * k; e += T) {
                int i = e / k, j = e % k;
                double v = 0.0;
                for (int r = i + 1; r < k; ++r) v += LL(r, i) * q.gm[r * k + j];
                v *= q.dinv[i];
                if (i == j) v -= q.dinv[i];
                q.mm[i * n2 + j] = v;
                q.mm[(k + i) * n2 + j] = q.gm[i * k + j];
                q.mm[j * n2 + k + i] = q.gm[i * k + j];
                q.mm[(k + i) * n2 + k + j] = q.sci[i * k + j];
            }
        }
#undef LL
        if (t == 0) s_bad = bad;
    }
    __syncthreads();
    return !s_bad;
}

// The inverse of the n×n matrix a into inv by Gauss–Jordan with partial pivoting (linalg.rs's
// invert; a is overwritten); false (every thread alike) where it is singular. n ≤ 32 (2k,
// k ≤ MAX_MEMORY = 16 pairs): the first warp does it alone, lane r holding column r of a and of
// inv, with warp barriers between the steps of a column. Spread over the block, each column
// took four block barriers and thread 0's pivot scan (Nsight Compute, BENCHMARKS.md issue 23,
// session 30). Each row's multiplier comes from the lane holding it by a shuffle and four rows'
// loads go out together: read from memory, each row waited on two loads in turn (session 32).
// Each entry is computed by the same operations as there, so the same bits.
__device__ bool invert_gj(double* __restrict__ a, double* __restrict__ inv, int n) {
    __shared__ int s_ok;
    const unsigned full = 0xffffffffu;
    const int t = threadIdx.x;
    if (t < 32) {
        const int lane = t;
        double scale = 0.0;
        for (int e = lane; e < n * n; e += 32) {
            scale = fmax(scale, fabs(a[e]));
            inv[e] = (e / n == e % n) ? 1.0 : 0.0;
        }
        for (int off = 16; off > 0; off >>= 1) scale = fmax(scale, __shfl_xor_sync(full, scale, off));
        scale = fmax(scale, 2.2250738585072014e-308);
        bool ok = true;
        __syncwarp();
        for (int col = 0; col < n; ++col) {
            // The pivot: the last row from col on whose |entry| is the largest (a scan that takes
            // a row at least as large as the one held, as thread 0's did); a NaN never replaces
            // the row held, and a NaN at col is kept (the column then counts as singular).
            const int i = col + lane;
            const double raw = i < n ? a[i * n + col] : 0.0;
            double v = i < n ? fabs(raw) : -1.0;
            const double at_col = __shfl_sync(full, v, 0);
            if (v != v) v = -1.0;
            int piv = i < n ? i : -1;
            for (int off = 16; off > 0; off >>= 1) {
                const double ov = __shfl_xor_sync(full, v, off);
                const int oi = __shfl_xor_sync(full, piv, off);
                if (ov > v || (ov == v && oi > piv)) {
                    v = ov;
                    piv = oi;
                }
            }
            if (at_col != at_col) piv = col;
            // The pivot's entry, from the lane that read it.
            const double pv = __shfl_sync(full, raw, piv - col);
            if (!(fabs(pv) > 1e-14 * scale)) {
                ok = false;
                break;
            }
            if (piv != col && lane < n) {
                double x = a[piv * n + lane]; a[piv * n + lane] = a[col * n + lane]; a[col * n + lane] = x;
                x = inv[piv * n + lane]; inv[piv * n + lane] = inv[col * n + lane]; inv[col * n + lane] = x;
            }
            __syncwarp();
            const double d = 1.0 / pv;
            // Lane r holds row r's entry of the column (after the exchange); each row takes it
            // by a shuffle, and four rows' loads go out together.
            const double fv = lane < n ? a[lane * n + col] : 0.0;
            double pa = 0.0, pi = 0.0;
            if (lane < n) {
                pa = a[col * n + lane] * d;
                pi = inv[col * n + lane] * d;
                a[col * n + lane] = pa;
                inv[col * n + lane] = pi;
            }
            for (int r0 = 0; r0 < n; r0 += 4) {
                double f[4], av[4], iv[4];
#pragma unroll
                for (int u = 0; u < 4; ++u) f[u] = __shfl_sync(full, fv, (r0 + u) & 31);
                if (lane < n) {
#pragma unroll
                    for (int u = 0; u < 4; ++u) {
                        av[u] = iv[u] = 0.0;
                        if (r0 + u < n) {
                            av[u] = a[(r0 + u) * n + lane];
                            iv[u] = inv[(r0 + u) * n + lane];
                        }
                    }
#pragma unroll
                    for (int u = 0; u < 4; ++u) {
                        const int row = r0 + u;
                        if (row < n && row != col && f[u] != 0.0) {
                            a[row * n + lane] = av[u] - f[u] * pa;
                            inv[row * n + lane] = iv[u] - f[u] * pi;
                        }
                    }
                }
            }
            __syncwarp();
        }
        if (lane == 0) s_ok = ok ? 1 : 0;
    }
    __syncthreads();
    return s_ok != 0;
}

// Everything the direction reads and writes.
struct Dir {
    const double *x, *g, *lo, *hi;
    const int* kink;
    double *S, *Y;
    int P, k, head, m;
    double theta;
    bool any_kink;  // a free coordinate has a kink
    int n_movable;  // the optimizer's coordinates (lower < upper for toy fits; not held, in descents)
    // In a descent (fit_runs), the sides (2: held; the others are the host's coordinates, even
    // with lower = upper); null for toy fits.
    const double* side;
    double *tbuf, *dc, *xcp, *flag, *dhat, *rfull, *d;
};

// rfull = H·g, H the limited-memory inverse Hessian with H₀ = I/θ, by the two-loop recursion
// (lbfgsb.rs's h_times; ρ_j = 1/s_jᵀy_j from the stored SᵀY).
__device__ void two_loop(const Dir& D, const Small& q, double* red) {
    const int t = threadIdx.x, T = blockDim.x, P = D.P, k = D.k, m = D.m;
    for (int i = t; i < P; i += T) D.rfull[i] = D.g[i];
    for (int j = k - 1; j >= 0; --j) {
        int s = slot_of(j, k, D.head, m);
        double a = block_dot(D.S + (long long)s * P, D.rfull, P, red) / q.sty[j * m + j];
        if (t == 0) q.sol[j] = a;
        const double* y = D.Y + (long long)s * P;
        for (int i = t; i < P; i += T) D.rfull[i] -= a * y[i];
    }
    for (int i = t; i < P; i += T) D.rfull[i] /= D.theta;
    __syncthreads(); // q.sol
    for (int j = 0; j < k; ++j) {
        int s = slot_of(j, k, D.head, m);
        double b = block_dot(D.Y + (long long)s * P, D.rfull, P, red) / q.sty[j * m + j];
        double c = q.sol[j] - b;
        const double* sv = D.S + (long long)s * P;
        for (int i = t; i < P; i += T) D.rfull[i] += c * sv[i];
    }
}

// Lists in `out` (as doubles), in increasing order, the coordinates i < P with free[i] == 0 and
// lo[i] < hi[i]; returns how many (every thread alike). Each warp takes 32 consecutive
// coordinates a round: a ballot says which, the warps' counts before it say where they go.
__device__ int list_in_order(const double* free, const double* lo, const double* hi, int P, double* out) {
    __shared__ int s_warp[32];
    const int t = threadIdx.x, T = blockDim.x, lane = t & 31, w = t >> 5, W = T >> 5;
    int cnt = 0;
    for (int base = 0; base < P; base += T) {
        int i = base + t;
        bool listed = i < P && free[i] == 0.0 && lo[i] < hi[i];
        unsigned mask = __ballot_sync(0xffffffffu, listed);
        if (lane == 0) s_warp[w] = __popc(mask);
        __syncthreads();
        int before = cnt, round = 0;
        for (int v = 0; v < W; ++v) {
            if (v < w) before += s_warp[v];
            round += s_warp[v];
        }
        if (listed) out[before + __popc(mask & ((1u << lane) - 1u))] = (double)i;
        cnt += round;
        __syncthreads();
    }
    return cnt;
}

// d = x̄ − x, x̄ the L-BFGS-B point; false where the compact matrices are singular (the caller
// then starts the memory afresh, as lbfgsb.rs does).
__device__ __noinline__ bool lbfgsb_direction(const Dir& D, const Small& q, double* red) {
    const int t = threadIdx.x, T = blockDim.x, P = D.P, k = D.k, m = D.m;
    const double theta = D.theta;
    if (!D.any_kink) {
        // The usual case, without M: x̄ = x − H·g (two-loop recursion) wherever the Cauchy point
        // would leave every coordinate free — no coordinate at a bound and the first breakpoint
        // beyond the model's minimum along −g, dt* = gᵀg / gᵀBg ≤ gᵀHg / gᵀg (Cauchy–Schwarz
        // for positive definite B = H⁻¹) — and x − H·g strictly inside the box: there
        // lbfgsb.rs's fast path gives this point whatever the Cauchy point is. (Where the host
        // would find the Schur complement of M not positive definite and start its memory
        // afresh, this takes x − H·g: a rare difference, caught by the certificate if it
        // matters.) A free coordinate at a bound rules the fast path out: that is checked first,
        // so that the two-loop recursion (2k reductions over the block) is not run for nothing
        // where bounds are met (on a model with γ at their bounds, a tenth of the fit's time).
        double at_bound = 0.0;
        for (int i = t; i < P; i += T)
            if (D.lo[i] < D.hi[i] && (D.x[i] <= D.lo[i] || D.x[i] >= D.hi[i])) at_bound = 1.0;
        if (block_max(at_bound, red) == 0.0) {
            two_loop(D, q, red);
            double ghg = 0.0, gg = 0.0, tmin = 1.0 / 0.0, off = 0.0;
            for (int i = t; i < P; i += T) {
                double gi = D.g[i], xi = D.x[i];
                ghg += gi * D.rfull[i];
                gg += gi * gi;
                if (!(D.lo[i] < D.hi[i])) {
                    // A coordinate of the host's held at equal bounds in a descent: never free at
                    // the Cauchy point, so lbfgsb.rs takes its general path.
                    if (D.side && D.side[i] != 2.0) off = 1.0;
                    continue;
                }
                double xb = xi - D.rfull[i];
                if (xi <= D.lo[i] || xi >= D.hi[i] || !(xb > D.lo[i] && xb < D.hi[i])) off = 1.0;
                if (gi < 0.0 && isfinite(D.hi[i])) tmin = fmin(tmin, (xi - D.hi[i]) / gi);
                else if (gi > 0.0 && isfinite(D.lo[i])) tmin = fmin(tmin, (xi - D.lo[i]) / gi);
            }
            block_sum2(ghg, gg, red);
            tmin = -tmin; // (a minimum as the maximum of the negatives, as block_min takes it)
            block_max2(tmin, off, red);
            tmin = -tmin;
            if (off == 0.0 && ghg > 0.0 && gg > 0.0 && tmin > (ghg / gg) * (1.0 + 1e-9)) {
                for (int i = t; i < P; i += T) D.d[i] = (D.x[i] - D.rfull[i]) - D.x[i];
                return true;
            }
        }
    }
    if (k > 0 && !build_m(q, k, m, theta)) return false;
    // Breakpoints of the projected steepest descent path.
    double dd = 0.0;
    for (int i = t; i < P; i += T) {
        double gi = D.g[i], ti = 1.0 / 0.0;
        if (gi < 0.0) ti = isfinite(D.hi[i]) ? (D.x[i] - D.hi[i]) / gi : 1.0 / 0.0;
        else if (gi > 0.0) ti = isfinite(D.lo[i]) ? (D.x[i] - D.lo[i]) / gi : 1.0 / 0.0;
        D.tbuf[i] = ti;
        double di = ti == 0.0 ? 0.0 : -gi;
        D.dc[i] = di;
        D.xcp[i] = D.x[i];
        D.flag[i] = ti == 0.0 ? 1.0 : 0.0;
        dd += di * di;
    }
    dd = block_sum(dd, red);
    wt_times(D.S, D.Y, k, D.head, m, P, theta, D.dc, q.p, red);
    double* sc = q.scal; // 0 fp, 1 fpp, 2 fpp0, 3 dt_min, 4 t_old, 6 zb
    m_times(q, k, q.p, q.mp);
    if (t == 0) {
        for (int j = 0; j < 2 * k; ++j) q.c[j] = 0.0;
        double pmp = 0.0;
        for (int j = 0; j < 2 * k; ++j) pmp += q.p[j] * q.mp[j];
        sc[0] = -dd;
        sc[1] = theta * dd - pmp;
        sc[2] = fmax(fabs(sc[1]), 2.2250738585072014e-308);
        sc[3] = sc[1] > 0.0 ? -sc[0] / sc[1] : 1.0 / 0.0;
        sc[4] = 0.0;
    }
    __syncthreads();
    // Breakpoints in increasing order until the model's minimum along the path comes first: the
    // first warp alone (a few 2k-vectors per breakpoint, each made by the same operations as
    // spread over the block, which took six block barriers a breakpoint), the others waiting.
    if (t < 32) {
        const unsigned full = 0xffffffffu;
        const int n2 = 2 * k;
        for (;;) {
            double bt = 1.0 / 0.0;
            int bi = 0x7fffffff;
            for (int i = t; i < P; i += 32) {
                double ti = D.tbuf[i];
                if (D.flag[i] == 0.0 && ti > 0.0 && isfinite(ti) && (ti < bt || (ti == bt && i < bi))) { bt = ti; bi = i; }
            }
            for (int off = 16; off > 0; off >>= 1) {
                double ot = __shfl_xor_sync(full, bt, off);
                int oi = __shfl_xor_sync(full, bi, off);
                if (ot < bt || (ot == bt && oi < bi)) { bt = ot; bi = oi; }
            }
            const int b = bi;
            const double tb = bt;
            if (b == 0x7fffffff) break;
            double dt = tb - sc[4];
            if (sc[3] < dt) break;
            if (t == 0) {
                double xb = D.dc[b] > 0.0 ? D.hi[b] : D.lo[b];
                D.xcp[b] = xb;
                D.flag[b] = 1.0;
                sc[6] = xb - D.x[b];
                for (int j = 0; j < n2; ++j) q.c[j] += dt * q.p[j];
                for (int j = 0; j < k; ++j) {
                    long long o = (long long)slot_of(j, k, D.head, m) * P + b;
                    q.wrow[j] = D.Y[o];
                    q.wrow[k + j] = theta * D.S[o];
                }
            }
            __syncwarp();
            m_rows(q, k, q.c, q.mc, 32);
            m_rows(q, k, q.wrow, q.mw, 32);
            __syncwarp();
            if (t == 0) {
                double gb = D.g[b], zb = sc[6];
                double wmc = 0.0, wmp = 0.0, wmw = 0.0;
                for (int j = 0; j < n2; ++j) { wmc += q.wrow[j] * q.mc[j]; wmp += q.wrow[j] * q.mp[j]; wmw += q.wrow[j] * q.mw[j]; }
                double fp = sc[0], fpp = sc[1];
                fp += dt * fpp + gb * gb + theta * gb * zb - gb * wmc;
                fpp += -theta * gb * gb - 2.0 * gb * wmp - gb * gb * wmw;
                for (int j = 0; j < n2; ++j) q.p[j] += gb * q.wrow[j];
                D.dc[b] = 0.0;
                sc[0] = fp;
                sc[1] = fpp;
            }
            __syncwarp();
            m_rows(q, k, q.p, q.mp, 32);
            __syncwarp();
            if (t == 0) {
                double fpp = fmax(sc[1], 2.220446049250313e-16 * sc[2]);
                sc[1] = fpp;
                sc[3] = -sc[0] / fpp;
                sc[4] = tb;
            }
            __syncwarp();
        }
    }
    __syncthreads();
    double dt_min = fmax(sc[3], 0.0);
    double t_cp = sc[4] + dt_min;
    double nfree = 0.0;
    for (int i = t; i < P; i += T) {
        if (D.flag[i] == 0.0) D.xcp[i] = fmin(fmax(D.x[i] + t_cp * D.dc[i], D.lo[i]), D.hi[i]);
        bool fr = D.xcp[i] > D.lo[i] && D.xcp[i] < D.hi[i];
        D.tbuf[i] = fr ? 1.0 : 0.0; // from here: whether coordinate i is free at the Cauchy point
        nfree += fr ? 1.0 : 0.0;
    }
    nfree = block_sum(nfree, red);
    if (t == 0)
        for (int j = 0; j < 2 * k; ++j) q.c[j] += dt_min * q.p[j];
    __syncthreads();
    if (nfree == 0.0) {
        for (int i = t; i < P; i += T) D.d[i] = D.xcp[i] - D.x[i];
        return true;
    }
    if ((int)nfree == D.n_movable && !D.any_kink) {
        // Every coordinate free: x − H·g by the two-loop recursion (lbfgsb.rs's fast path).
        two_loop(D, q, red);
        for (int i = t; i < P; i += T) D.dhat[i] = D.x[i] - D.rfull[i] - D.xcp[i];
    } else {
        // The model's minimiser over the free coordinates from the Cauchy point.
        m_times(q, k, q.c, q.mc);
        for (int i = t; i < P; i += T) {
            bool fr = D.tbuf[i] != 0.0;
            double wmc = k > 0 ? w_times_at(D.S, D.Y, k, D.head, m, P, theta, q.mc, i) : 0.0;
            double r = fr ? D.g[i] + theta * (D.xcp[i] - D.x[i]) - wmc : 0.0;
            D.rfull[i] = r;
            D.dhat[i] = fr ? -r / theta : 0.0;
        }
        if (k > 0) {
            const int n2 = 2 * k;
            wt_times(D.S, D.Y, k, D.head, m, P, theta, D.rfull, q.v, red);
            // The coordinates not free at the Cauchy point (usually few), listed in dc in
            // increasing order (the sums below take them in that order).
            const int cnt = list_in_order(D.tbuf, D.lo, D.hi, P, D.dc);
            // WᶻᵀWᶻ = WᵀW minus the rows of the coordinates at a bound.
            for (int e = t; e < n2 * n2; e += T) {
                int a = e / n2, b = e % n2;
                double v;
                if (a < k && b < k) v = q.yty[a * m + b];
                else if (a < k) v = theta * q.sty[(b - k) * m + a];
                else if (b < k) v = theta * q.sty[(a - k) * m + b];
                else v = theta * theta * q.sts[(a - k) * m + (b - k)];
                int ja = a < k ? a : a - k, jb = b < k ? b : b - k;
                const double* va = (a < k ? D.Y : D.S) + (long long)slot_of(ja, k, D.head, m) * P;
                const double* vb = (b < k ? D.Y : D.S) + (long long)slot_of(jb, k, D.head, m) * P;
                double fa = a < k ? 1.0 : theta, fb = b < k ? 1.0 : theta;
                for (int r = 0; r < cnt; ++r) {
                    int i = (int)D.dc[r];
                    v -= (fa * va[i]) * (fb * vb[i]);
                }
                q.wzw[e] = v;
            }
            __syncthreads();
            m_times(q, k, q.v, q.mv);
            // N = I − (1/θ) M WᶻᵀWᶻ
            for (int e = t; e < n2 * n2; e += T) {
                int a = e / n2, b = e % n2;
                double mw = 0.0;
                for (int j = 0; j < n2; ++j) mw += q.mm[a * n2 + j] * q.wzw[j * n2 + b];
                q.nm[e] = (a == b ? 1.0 : 0.0) - mw / theta;
            }
            __syncthreads();
            if (!invert_gj(q.nm, q.ni, n2)) return false;
            for (int a = t; a < n2; a += T) {
                double r = 0.0;
                for (int b = 0; b < n2; ++b) r += q.ni[a * n2 + b] * q.mv[b];
                q.sol[a] = r;
            }
            __syncthreads();
            for (int i = t; i < P; i += T)
                if (D.tbuf[i] != 0.0)
                    D.dhat[i] -= w_times_at(D.S, D.Y, k, D.head, m, P, theta, q.sol, i) / (theta * theta);
        }
    }
    // x̄ = P(x_cp + d̂) over the free coordinates; where that is no descent from x, the step is
    // cut at the first bound instead (lbfgsb.rs's project_step).
    double descent = 0.0;
    for (int i = t; i < P; i += T) {
        double xb = D.tbuf[i] != 0.0 ? fmin(fmax(D.xcp[i] + D.dhat[i], D.lo[i]), D.hi[i]) : D.xcp[i];
        D.d[i] = xb;
        descent += (xb - D.x[i]) * D.g[i];
    }
    descent = block_sum(descent, red);
    if (descent >= 0.0) {
        double alpha = 1.0;
        for (int i = t; i < P; i += T) {
            if (D.tbuf[i] == 0.0) continue;
            double dh = D.dhat[i];
            if (dh > 0.0) alpha = fmin(alpha, (D.hi[i] - D.xcp[i]) / dh);
            else if (dh < 0.0) alpha = fmin(alpha, (D.lo[i] - D.xcp[i]) / dh);
        }
        alpha = fmax(block_min(alpha, red), 0.0);
        for (int i = t; i < P; i += T)
            if (D.tbuf[i] != 0.0) D.d[i] = fmin(fmax(D.xcp[i] + alpha * D.dhat[i], D.lo[i]), D.hi[i]);
    }
    for (int i = t; i < P; i += T) D.d[i] -= D.x[i];
    return true;
}

// One toy's fit: its pointers and the block's shares of work (fit_one sets it up).
struct Fit {
    const Tables* tb;
    const FitArgs* A;
    const double* row;
    double *z, *g, *d, *zt, *gt, *zl, *gl, *zb4, *gb4, *S, *Y, *sc, *red;
    Small q;
    Dir D;
    // The empty-bin wall evaluations use (EMPTY_BIN_WALL but in the first descents).
    double wall;
    // The box (the launch's for toy fits, each descent's own in fit_runs) and, in a descent,
    // the sides of eval_z (null for toy fits).
    const double *lo, *hi, *side;
    // A watched descent (Watch in histfit-compute's resident.rs): the coordinate (−1: none),
    // the ceiling, the EDM factor, the first iteration watched, the iterations held.
    int watch, w_after, w_held;
    double w_ceiling, w_factor;
    // Added to every f of a descent: its dataset's constant, as the batch evaluator adds it (0
    // for toy fits).
    double cst;
};

// L-BFGS-B from z (f and g there given) with fresh memory, to one of its stopping rules
// (lbfgsb.rs), or FIT_GAVE_UP where the fit's watch gives it up (F.watch ≥ 0: descent.rs's
// `run`): returns the status, leaves the end point in z, f, g.
__device__ __noinline__ int descend(Fit& F, double& f, int& iters, int& evals, double& bounded) {
    const Tables& tb = *F.tb;
    const FitArgs& A = *F.A;
    const double* row = F.row;
    double *z = F.z, *g = F.g, *d = F.d, *zt = F.zt, *gt = F.gt, *zl = F.zl, *gl = F.gl, *S = F.S,
           *Y = F.Y, *sc = F.sc, *red = F.red;
    const Small& q = F.q;
    Dir& D = F.D;
    const int t = threadIdx.x, T = blockDim.x, P = tb.n_params, m = A.memory;
    const double* lo = F.lo;
    const double* hi = F.hi;
    double pg = projected_gradient(lo, hi, z, g, P, red);
    // (The host's L-BFGS-B counts the evaluation at its start among its own.)
    int k = 0, head = 0, status = 0, iter0 = iters, eval0 = evals - 1;
    double theta = 1.0;
    bool fresh = true;
    if (!isfinite(f) || !(pg == pg)) return FIT_FAILED_START;
    if (pg <= A.pgtol) return FIT_CONVERGED;
    // A watched descent (descent.rs's `run`) is judged once per iteration taken, at the new
    // iterate with the EDM of the direction computed from it (the last one where the run ends
    // there): `judge` is set when an iteration is taken, and the test made at the next
    // direction or at the end.
    const int wk = F.watch;
    int held = 0;
    bool judge = false;
    double dg_last = 0.0;
    const auto given_up = [&]() {
        judge = false;
        // (Every thread reads z, g of the watched coordinate: written before the last barrier.)
        double g = F.g[wk];
        bool pushed_back = (lo[wk] == 0.0 && g > 0.0) || (hi[wk] == 0.0 && g < 0.0);
        held = (z[wk] == 0.0 && pushed_back) ? held + 1 : 0;
        bool above = f - F.w_factor * fmax(-0.5 * dg_last, 0.0) > F.w_ceiling;
        return iters - iter0 >= F.w_after && (above || held >= F.w_held);
    };
    while (status == 0) {
        if (iters - iter0 >= A.max_iterations || evals >= A.fit_evaluations) {
            status = FIT_FAILED_LIMIT;
            break;
        }
        for (int i = t; i < P; i += T)
            if (lo[i] < hi[i] && (z[i] <= lo[i] || z[i] >= hi[i])) bounded = 1.0;
        if (t == 0) {
            D.k = k;
            D.head = head;
            D.theta = theta;
        }
        __syncthreads();
        if (!lbfgsb_direction(D, q, red)) {
            if (k > 0) {
                k = 0; theta = 1.0; fresh = true;
                continue;
            }
            status = FIT_FAILED_DIRECTION;
            break;
        }
        double dg0 = 0.0, dd = 0.0;
        for (int i = t; i < P; i += T) {
            dg0 += d[i] * g[i];
            dd += d[i] * d[i];
        }
        block_sum2(dg0, dd, red);
        dg_last = dg0;
        if (k > 0 && dg0 < 0.0 && -0.5 * dg0 <= A.edm) {
            status = FIT_CONVERGED;
            break;
        }
        if (dd == 0.0 || !(dg0 < 0.0)) {
            if (k > 0 && !fresh) {
                k = 0; theta = 1.0; fresh = true;
                continue;
            }
            status = pg <= 1e3 * A.pgtol ? FIT_CONVERGED : FIT_FAILED_DIRECTION;
            break;
        }
        if (judge && wk >= 0 && given_up()) {
            status = FIT_GAVE_UP;
            break;
        }
        // The largest step that keeps z + αd in the box (≥ 1: x̄ is feasible), and not across
        // a kink (lbfgsb.rs's rule).
        double amax = 1.0 / 0.0, akink = 1.0 / 0.0;
        for (int i = t; i < P; i += T) {
            double di = d[i];
            if (di > 0.0) amax = fmin(amax, (hi[i] - z[i]) / di);
            else if (di < 0.0) amax = fmin(amax, (lo[i] - z[i]) / di);
            if (A.kink[i] && fabs(z[i]) > 1e-12 && di != 0.0 && (z[i] > 0.0) != (di > 0.0))
                akink = fmin(akink, -z[i] / di);
        }
        amax = -amax;
        akink = -akink;
        block_max2(amax, akink, red);
        amax = -amax;
        akink = -akink;
        amax = amax != amax ? 1.0 : fmin(fmax(amax, 1.0), 1e10);
        amax = fmin(amax, akink);
        double a0 = k == 0 ? fmin(1.0, 1.0 / sqrt(dd)) : 1.0;
        a0 = fmin(a0, amax);
        // Line search along d (trial points clamped into the box).
        Trial prev = {0.0, f, dg0}, tlo = prev, thi = prev;
        for (int i = t; i < P; i += T) { zl[i] = z[i]; gl[i] = g[i]; }
        int ls = 0;
        bool zoom = false, accepted = false;
        double at = a0, ft = 0.0;
        for (;;) {
            for (int i = t; i < P; i += T) zt[i] = fmin(fmax(z[i] + at * d[i], lo[i]), hi[i]);
            ft = eval_z(tb, A, zt, gt, row, sc, red, F.wall, F.side) + F.cst;
            ++evals;
            ++ls;
            double dg = block_dot(gt, d, P, red);
            bool fin = isfinite(ft) && isfinite(dg);
            Trial cur = {at, fin ? ft : 1.0 / 0.0, fin ? dg : 0.0 / 0.0};
            bool armijo = fin && ft <= f + A.c1 * at * dg0;
            bool curvature = fin && fabs(dg) <= -A.c2 * dg0;
            if (!zoom) {
                if (!armijo || (ls > 1 && cur.f >= prev.f)) {
                    thi = cur;
                    zoom = true;
                } else if (curvature) {
                    accepted = true;
                    break;
                } else if (dg >= 0.0) {
                    thi = prev;
                    tlo = cur;
                    for (int i = t; i < P; i += T) { zl[i] = zt[i]; gl[i] = gt[i]; }
                    zoom = true;
                } else if (at >= amax) {
                    accepted = true;
                    break;
                } else {
                    tlo = cur;
                    for (int i = t; i < P; i += T) { zl[i] = zt[i]; gl[i] = gt[i]; }
                    prev = cur;
                    at = fmin(4.0 * at, amax);
                    continue;
                }
            } else {
                if (!armijo || cur.f >= tlo.f) {
                    thi = cur;
                } else {
                    if (curvature) {
                        accepted = true;
                        break;
                    }
                    if (dg * (thi.a - tlo.a) >= 0.0) thi = tlo;
                    tlo = cur;
                    for (int i = t; i < P; i += T) { zl[i] = zt[i]; gl[i] = gt[i]; }
                }
            }
            double width = fabs(thi.a - tlo.a);
            if (ls >= 20 || width <= 1e-14 * fmax(fabs(thi.a), fabs(tlo.a))) break;
            at = zoom_step(tlo, thi);
        }
        if (!accepted) {
            // The line search ran out of room: the best point with sufficient decrease, else a
            // fresh start from steepest descent, else stop.
            if (tlo.a > 0.0 && tlo.f < f) {
                for (int i = t; i < P; i += T) { zt[i] = zl[i]; gt[i] = gl[i]; }
                ft = tlo.f;
            } else if (!fresh) {
                k = 0; theta = 1.0; fresh = true;
                continue;
            } else {
                double edm = -0.5 * dg0;
                double noise = 1e-12 * fmax(fabs(f), 1.0);
                status = (pg <= A.pgtol * 1e3 || edm <= fmax(1e3 * A.edm, noise)) ? FIT_CONVERGED
                                                                                  : FIT_FAILED_LINE_SEARCH;
                break;
            }
        }
        // Accept the trial point; keep (s, y) where the curvature is positive.
        ++iters;
        judge = true;
        for (int i = t; i < P; i += T) {
            zl[i] = zt[i] - z[i];
            gl[i] = gt[i] - g[i];
            z[i] = zt[i];
            g[i] = gt[i];
        }
        double sy = 0.0, yy = 0.0;
        for (int i = t; i < P; i += T) {
            sy += zl[i] * gl[i];
            yy += gl[i] * gl[i];
        }
        block_sum2(sy, yy, red);
        double f_old = f;
        f = ft;
        if (sy > 2.220446049250313e-16 * yy && sy > 0.0) {
            // push_pair: drop the oldest pair when full (the k×k blocks shift up-left), then
            // the new pair's rows of SᵀS, SᵀY and YᵀY.
            // (Spread over the block: on thread 0 alone these moves and sums were a sixth of
            // the fits' time, one dependent load after another.)
            if (k == m) {
                // The three blocks' moved entries read into the work area nm (4m² doubles, free
                // between directions) first, then written: no thread reads an entry another
                // has already overwritten.
                const int m1 = m - 1, n1 = m1 * m1;
                for (int e = t; e < 3 * n1; e += T) {
                    int b = e / n1, r = e - b * n1, i = r / m1, j = r - i * m1;
                    const double* from = b == 0 ? q.sts : (b == 1 ? q.sty : q.yty);
                    q.nm[e] = from[(i + 1) * m + j + 1];
                }
                __syncthreads();
                for (int e = t; e < 3 * n1; e += T) {
                    int b = e / n1, r = e - b * n1, i = r / m1, j = r - i * m1;
                    double* to = b == 0 ? q.sts : (b == 1 ? q.sty : q.yty);
                    to[i * m + j] = q.nm[e];
                }
                --k;
            }
            double* sd = S + (long long)head * P;
            double* yd = Y + (long long)head * P;
            for (int i = t; i < P; i += T) { sd[i] = zl[i]; yd[i] = gl[i]; }
            head = (head + 1) % m;
            ++k;
            int last = k - 1;
            int W = T >> 5;
            for (int j = 0; j < k; ++j) {
                const double* sj = S + (long long)slot_of(j, k, head, m) * P;
                const double* yj = Y + (long long)slot_of(j, k, head, m) * P;
                double a0s = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
                for (int i = t; i < P; i += T) {
                    a0s += sj[i] * zl[i];
                    a1 += sj[i] * gl[i];
                    a2 += zl[i] * yj[i];
                    a3 += yj[i] * gl[i];
                }
                for (int off = 16; off > 0; off >>= 1) {
                    a0s += __shfl_down_sync(0xffffffffu, a0s, off);
                    a1 += __shfl_down_sync(0xffffffffu, a1, off);
                    a2 += __shfl_down_sync(0xffffffffu, a2, off);
                    a3 += __shfl_down_sync(0xffffffffu, a3, off);
                }
                if ((t & 31) == 0) {
                    int w = t >> 5;
                    red[(4 * j + 0) * W + w] = a0s;
                    red[(4 * j + 1) * W + w] = a1;
                    red[(4 * j + 2) * W + w] = a2;
                    red[(4 * j + 3) * W + w] = a3;
                }
            }
            __syncthreads();
            // Each of the 4k sums by its own thread. (Where j = last, s_j·y and s·y_j are the
            // same products summed alike, so the two writes to sty[last, last] agree.)
            for (int e = t; e < 4 * k; e += T) {
                const int j = e >> 2, u = e & 3;
                double r = 0.0;
                for (int w = 0; w < W; ++w) r += red[(4 * j + u) * W + w];
                if (u == 0) {
                    q.sts[j * m + last] = r;
                    q.sts[last * m + j] = r;
                } else if (u == 1) {
                    q.sty[j * m + last] = r;
                } else if (u == 2) {
                    q.sty[last * m + j] = r;
                } else {
                    q.yty[j * m + last] = r;
                    q.yty[last * m + j] = r;
                }
            }
            __syncthreads();
            theta = yy / sy;
            fresh = false;
        }
        pg = projected_gradient(lo, hi, z, g, P, red);
        if (pg <= A.pgtol) status = FIT_CONVERGED;
        else if (f_old - f <= A.ftol * fmax(fmax(fabs(f_old), fabs(f)), 1.0)) status = FIT_CONVERGED;
        else if (evals - eval0 >= A.max_evaluations) status = FIT_FAILED_LIMIT;
    }
    if (judge && wk >= 0 && status != FIT_GAVE_UP && given_up()) status = FIT_GAVE_UP;
    return status;
}

// Up to six Newton steps over the coordinates off their bounds (polish.rs): conjugate gradients
// on Hessian–vector products from gradient differences, then the full step or shorter ones,
// each judged against the f polishing started from. z, f move; g is not touched (trial
// gradients go to gt), so the caller evaluates again.
// The box is the fit's (F.lo, F.hi: the launch's for toy fits, a request's in fit_runs, whose
// sides F.side hold the held parameters; every f gets the dataset's constant F.cst).
__device__ __noinline__ void polish(Fit& F, double& f, int& evals) {
    const Tables& tb = *F.tb;
    const FitArgs& A = *F.A;
    const int t = threadIdx.x, T = blockDim.x, P = tb.n_params;
    const double *lo = F.lo, *hi = F.hi;
    double *z = F.z, *red = F.red;
    double* act = F.D.flag;   // 1 where the coordinate takes part
    double* g0 = F.D.tbuf;    // gradient at z over the active coordinates (0 elsewhere)
    double* gw = F.gt;        // gradients of the probes and trial points
    double* v = F.zl;         // the Newton step
    double* r = F.gl;         // CG residual
    double* dv = F.d;         // CG direction
    double* hd = F.D.dc;      // Hessian times dv
    double* zp = F.zt;        // probe and trial points
    const double margin = 1e-5;
    double na = 0.0;
    for (int i = t; i < P; i += T) {
        bool a = z[i] > lo[i] + margin && z[i] < hi[i] - margin && !(A.kink[i] && fabs(z[i]) <= margin);
        act[i] = a ? 1.0 : 0.0;
        na += a ? 1.0 : 0.0;
    }
    int n_active = (int)block_sum(na, red);
    if (n_active == 0) return;
    eval_z(tb, A, z, gw, F.row, F.sc, red, F.wall, F.side);
    ++evals;
    for (int i = t; i < P; i += T) g0[i] = act[i] != 0.0 ? gw[i] : 0.0;
    const double f_start = f;
    int cg_max = 2 * (n_active < 50 ? n_active : 50);
    for (int outer = 0; outer < 6; ++outer) {
        double g0n = sqrt(block_dot(g0, g0, P, red));
        if (!isfinite(g0n) || g0n <= 0.0) break;
        double dmax = 0.0;
        for (int i = t; i < P; i += T) {
            v[i] = 0.0;
            r[i] = -g0[i];
            dv[i] = r[i];
            dmax = fmax(dmax, fabs(dv[i]));
        }
        double rr = block_dot(r, r, P, red);
        for (int it = 0; it < cg_max; ++it) {
            dmax = block_max(dmax, red);
            double eps = 1e-8 / dmax;
            for (int i = t; i < P; i += T) zp[i] = act[i] != 0.0 ? z[i] + eps * dv[i] : z[i];
            eval_z(tb, A, zp, gw, F.row, F.sc, red, F.wall, F.side);
            ++evals;
            for (int i = t; i < P; i += T) hd[i] = act[i] != 0.0 ? (gw[i] - g0[i]) / eps : 0.0;
            double dhd = block_dot(dv, hd, P, red);
            if (!isfinite(dhd) || dhd <= 0.0) break;
            double alpha = rr / dhd;
            for (int i = t; i < P; i += T) {
                v[i] += alpha * dv[i];
                r[i] -= alpha * hd[i];
            }
            double rr_new = block_dot(r, r, P, red);
            if (sqrt(rr_new) <= 1e-6 * g0n) break;
            dmax = 0.0;
            for (int i = t; i < P; i += T) {
                dv[i] = r[i] + rr_new / rr * dv[i];
                dmax = fmax(dmax, fabs(dv[i]));
            }
            rr = rr_new;
        }
        double vmax = 0.0;
        for (int i = t; i < P; i += T) vmax = fmax(vmax, fabs(v[i]));
        if (block_max(vmax, red) == 0.0) break;
        // The full step, else shorter ones: past a change of curvature (an empty bin's wall)
        // the quadratic model overshoots.
        double noise = 1e-12 * fmax(fabs(f), 1.0);
        double step = 1.0;
        bool taken = false;
        double fn = 0.0;
        for (int tries = 0; tries < 8; ++tries) {
            for (int i = t; i < P; i += T)
                zp[i] = act[i] != 0.0 ? fmin(fmax(z[i] + step * v[i], lo[i]), hi[i]) : z[i];
            fn = eval_z(tb, A, zp, gw, F.row, F.sc, red, F.wall, F.side) + F.cst;
            ++evals;
            double gn = 0.0;
            for (int i = t; i < P; i += T)
                if (act[i] != 0.0) gn += gw[i] * gw[i];
            gn = sqrt(block_sum(gn, red));
            bool no_higher = fn <= f + noise && fn <= f_start + noise;
            if (fn < f - noise || (no_higher && gn < 0.5 * g0n)) {
                taken = true;
                break;
            }
            step *= 0.25;
        }
        if (!taken) break;
        for (int i = t; i < P; i += T) {
            z[i] = zp[i];
            g0[i] = act[i] != 0.0 ? gw[i] : 0.0;
        }
        f = fn;
    }
}

// One toy's fit against `row`, as histfit-infer's fit does it for a model without kinks and
// further starts: L-BFGS-B from the start (first on the wider empty-bin walls where the toy has
// an empty main bin, as search.rs's soft_descents), then its finish's first round (polish.rs's
// `finish`): Newton steps where the search converged with the certificate unmet (projected
// gradient above `certify`); a stopped line search, a point that round leaves uncertified or a
// fit past its evaluation budget goes to the host (its further rounds crawl, and two devices'
// roundings end them apart); then, where the point is certified but its projected gradient is
// above `polish_pg`, one more round of Newton steps kept where it stays certified (`sharpen`). Writes
// the FIT_OUT results at `o` (thread 0) and the fitted parameters at `ox`
// when not null. `st`: the block's state (see fit_toys for its layout). (fit_one follows.)
//
// lay_out: the fit's pointers into the block's state `st` (see fit_toys for its layout) and its
// box; called by thread 0, published by the caller's barrier.
__device__ void lay_out(Fit& F, const Tables& tb, const FitArgs& A, const double* row, double* st, double* sc,
                        double* red, const double* lo, const double* hi) {
    const int P = tb.n_params, m = A.memory;
    Dir& D = F.D;
    F.tb = &tb; F.A = &A; F.row = row; F.sc = sc; F.red = red;
    F.z = st; F.g = F.z + P; F.d = F.g + P; F.zt = F.d + P; F.gt = F.zt + P; F.zl = F.gt + P;
    F.gl = F.zl + P;
    F.zb4 = F.gl + 5 * (long long)P; // after the direction's four n-vectors; then gb4 (a descent's box
                                     // and sides follow: run_one, then the orthant
                                     // rounds' seven: orthant_rounds; a kinked fit's 31:
                                     // KState); S at s_off (54 n)
    F.gb4 = F.zb4 + P;
    F.S = st + A.s_off;
    F.Y = F.S + (long long)m * P;
    F.q = small_of(st + A.small_off, m);
    F.lo = lo; F.hi = hi;
    D.side = nullptr;
    D.x = F.z; D.g = F.g; D.lo = lo; D.hi = hi; D.kink = A.kink; D.S = F.S; D.Y = F.Y;
    D.P = P; D.m = m;
    D.tbuf = F.gl + P; D.dc = D.tbuf + P; D.xcp = D.dc + P; D.flag = D.xcp + P;
    D.dhat = F.zl; D.rfull = F.gl; D.d = F.d;
}

// A fit's result row (FIT_OUT values: f, the dataset's constant, the POI, the projected
// gradient, iterations, evaluations, status, coordinates left at their start, whether a free
// coordinate ends at a bound of lo..hi) and, where asked (ox), its parameters, at the end point
// z. The constant is Dataset::constant's: count_constant over main bins and Poisson auxiliary
// data, plus the Gaussian normalisations (given). fit_one's and fit_kinked's ending; every
// thread of the block calls it.
__device__ void write_fit(const Tables& tb, const FitArgs& A, const double* row, const double* z,
                          const double* lo, const double* hi, double f, double pg, int iters, int evals, int status,
                          double unmoved, double bounded, double* sc, double* red, double* o, double* ox) {
    const int t = threadIdx.x, T = blockDim.x, P = tb.n_params;
    for (int i = t; i < P; i += T)
        if (lo[i] < hi[i] && (z[i] <= lo[i] || z[i] >= hi[i])) bounded = 1.0;
    bounded = block_max(bounded, red);
    const int M = tb.n_main, R = M + tb.n_aux;
    double* v = sc + P;
    for (int b = t; b < R; b += T) {
        double n = row[b];
        bool counted = b < M || A.aux_kind[b - M] == KIND_POISSON;
        v[b] = counted ? count_constant(n) : 0.0;
    }
    __syncthreads();
    double constant = fixed_sum(v, R, red) + A.gauss_const;
    if (ox)
        for (int i = t; i < P; i += T) ox[i] = z[i] * A.scale[i];
    if (t == 0) {
        o[0] = f;
        o[1] = constant;
        o[2] = A.poi >= 0 ? z[A.poi] * A.scale[A.poi] : 0.0;
        o[3] = pg;
        o[4] = (double)iters;
        o[5] = (double)evals;
        o[6] = (double)status;
        o[7] = unmoved;
        o[8] = bounded;
    }
}

__device__ void fit_one(const Tables& tb, const FitArgs& A, const double* z_init, const double* row,
                        double* st, double* sc, double* red, double* o, double* ox) {
    const int t = threadIdx.x, T = blockDim.x, P = tb.n_params, m = A.memory;
    // The fit's pointers and direction state: one copy for the block in shared memory, every
    // field written by thread 0 and read by the others after a barrier. (As a local, every
    // thread kept its own copy on its stack for the functions that take it by reference, and
    // those copies missed the L1 cache: 5 % of the fits' time.)
    __shared__ Fit F;
    Dir& D = F.D;
    if (t == 0) {
        lay_out(F, tb, A, row, st, sc, red, A.z_lo, A.z_hi);
        F.side = nullptr;
        F.watch = -1;
        F.cst = 0.0;
    }
    __syncthreads();
    double* z = F.z;
    double* g = F.g;
    const double* lo = A.z_lo;
    const double* hi = A.z_hi;
    double movable = 0.0, kinked = 0.0;
    for (int i = t; i < P; i += T) {
        z[i] = fmin(fmax(z_init[i], lo[i]), hi[i]);
        if (lo[i] < hi[i]) {
            movable += 1.0;
            if (A.kink[i]) kinked = 1.0;
        }
    }
    const int n_movable = (int)block_sum(movable, red);
    const bool any_kink = block_max(kinked, red) > 0.0;
    if (t == 0) {
        D.n_movable = n_movable;
        D.any_kink = any_kink;
    }
    int evals = 1, iters = 0;
    // Whether a free coordinate met a bound (this thread's share; reported, not acted on).
    double bounded = 0.0;
    // The first descents on the wider walls of SOFT_WALL_0, SOFT_WALL_1 where the toy has an
    // empty main bin, then on its own (search.rs's soft_descents; histfit_compute's
    // SOFT_EMPTY_BIN_WALLS says why). A stage whose start is not finite leaves z where it was.
    double empty = 0.0;
    __syncthreads();  // (the toy's row, drawn by thread 0, is read by every thread here)
    for (int b = t; b < tb.n_main; b += T)
        if (row[b] == 0.0) empty = 1.0;
    const int soft = block_max(empty, red) > 0.0 ? 2 : 0;
    const auto stage_wall = [&](int stage) {
        return stage == soft ? EMPTY_BIN_WALL : (stage == 0 ? SOFT_WALL_0 : SOFT_WALL_1);
    };
    // (F.wall for descend and polish, which read it after the barriers of an evaluation.)
    double wall = stage_wall(0);
    if (t == 0) F.wall = wall;
    double f = eval_z(tb, A, z, g, row, sc, red, wall);
    // Where −ln L is not finite at the requested start (a generating point far from this toy's
    // fixed POI), the model's initial point where it is finite there (fit/mod.rs's
    // search_starts). The walls do not change whether f is finite.
    const double* start = z_init;
    if (!isfinite(f)) {
        double differs = 0.0;
        for (int i = t; i < P; i += T) {
            F.zt[i] = fmin(fmax(A.z_model[i], lo[i]), hi[i]);
            if (F.zt[i] != z[i]) differs = 1.0;
        }
        if (block_max(differs, red) > 0.0) {
            double fm = eval_z(tb, A, F.zt, F.gt, row, sc, red, wall);
            ++evals;
            if (isfinite(fm)) {
                for (int i = t; i < P; i += T) {
                    z[i] = F.zt[i];
                    g[i] = F.gt[i];
                }
                f = fm;
                start = A.z_model;
            }
        }
    }
    int status = 0;
    for (int stage = 0; stage <= soft; ++stage) {
        if (stage > 0) {
            wall = stage_wall(stage);
            if (t == 0) F.wall = wall;
            f = eval_z(tb, A, z, g, row, sc, red, wall);
            ++evals;
        }
        status = descend(F, f, iters, evals, bounded);
    }
    // Coordinates the first descent never moved, off kinks and bounds (the host fit probes them
    // for a saddle, search.rs's leave_saddle): counted so the host refits those toys. None
    // where nothing moved.
    double moved = 0.0, unmoved = 0.0;
    for (int i = t; i < P; i += T) {
        double z0 = fmin(fmax(start[i], lo[i]), hi[i]);
        if (z[i] != z0) moved += 1.0;
        else if (lo[i] < z0 && z0 < hi[i] && !A.kink[i]) unmoved += 1.0;
    }
    block_sum2(moved, unmoved, red);
    double pg = projected_gradient(lo, hi, z, g, P, red);
    // The finish (polish.rs's `finish`): its first round, Newton steps from a converged search
    // whose point is not certified. What the host's finish would go on with — rounds of fresh
    // descents after a stopped line search or a Newton round that leaves the point uncertified —
    // crawls along curved walls (an empty bin held at λ = 0), where two devices' roundings end
    // 1e-5 apart in twice_nll: such a fit comes back uncertified and the host fits it again.
    bool to_host = false;
    if (status != FIT_FAILED_START && isfinite(f)) {
        if (status == FIT_FAILED_LINE_SEARCH) {
            to_host = true;
        } else if (status == FIT_CONVERGED && pg > A.certify) {
            for (int i = t; i < P; i += T) F.zb4[i] = z[i];
            polish(F, f, evals);
            int same = 1;
            for (int i = t; i < P; i += T)
                if (z[i] != F.zb4[i]) same = 0;
            if (block_min((double)same, red) != 1.0) {
                eval_z(tb, A, z, g, row, sc, red, F.wall);
                ++evals;
                pg = projected_gradient(lo, hi, z, g, P, red);
            }
            to_host = !(pg <= A.certify);
        }
    }
    // Precision (polish.rs's `sharpen`): a certified point with a projected gradient above
    // polish_pg gets one more round of Newton steps, kept where the point stays certified.
    if (!to_host && isfinite(f) && status == FIT_CONVERGED && pg > A.polish_pg && pg <= A.certify) {
        for (int i = t; i < P; i += T) F.zb4[i] = z[i];
        const double f_before = f, pg_before = pg;
        polish(F, f, evals);
        int same = 1;
        for (int i = t; i < P; i += T)
            if (z[i] != F.zb4[i]) same = 0;
        if (block_min((double)same, red) != 1.0) {
            eval_z(tb, A, z, g, row, sc, red, F.wall);
            ++evals;
            pg = projected_gradient(lo, hi, z, g, P, red);
            // (g is left at the rejected point's gradient on a revert: nothing reads it after.)
            if (!(pg <= A.certify)) {
                for (int i = t; i < P; i += T) z[i] = F.zb4[i];
                f = f_before;
                pg = pg_before;
            }
        }
    }
    // The verdict (fit/mod.rs): a stopped line search whose point meets the certificate is a
    // minimum to f's resolution; a converged search that does not meet it is not. A fit that
    // reached its evaluation budget goes to the host whatever it ended with.
    if (evals >= A.fit_evaluations) to_host = true;
    if (to_host) status = FIT_UNCERTIFIED;
    else if (status == FIT_FAILED_LINE_SEARCH && pg <= A.certify) status = FIT_CONVERGED;
    else if (status == FIT_CONVERGED && !(pg <= A.certify)) status = FIT_UNCERTIFIED;
    write_fit(tb, A, row, z, lo, hi, f, pg, iters, evals, status, moved > 0.0 ? unmoved : 0.0, bounded, sc, red,
              o, ox);
}

// (Launch bounds for 256 threads, though blocks have 128: the register cap they set, with 4 blocks
// per SM, ran fastest in the sweep of BENCHMARKS.md, issue 23.)
extern "C" __global__ void __launch_bounds__(256, FIT_MIN_BLOCKS) fit_toys(Tables tb, FitArgs A) {
    extern __shared__ double smem[];
    __shared__ int s_toy;
    const int t = threadIdx.x, T = blockDim.x;
    const int P = tb.n_params, M = tb.n_main, R = M + tb.n_aux;
    double* st = A.state + (long long)blockIdx.x * A.state_len;
    // State: z g d zt gt zl gl, four n-vectors of the direction, the point and gradient before
    // a finishing round, a descent's box and sides (fit_runs), the orthant rounds' seven and a
    // kinked fit's 31 n-vectors (unused here), S and Y (m × n each), the Small area, then the
    // toy's row.
    double* row = st + A.row_off;
    double* sc = A.scratch + (long long)blockIdx.x * A.scratch_len;
    // The model's tables and the fit's arguments, one copy for the block in shared memory: the
    // functions below take them by reference, and a reference to a kernel parameter is a copy
    // on every thread's stack. (Published by the loop's first barrier.)
    __shared__ Tables s_tb;
    __shared__ FitArgs s_A;
    if (t == 0) {
        s_tb = tb;
        s_A = A;
    }
    for (;;) {
        __syncthreads();
        if (t == 0) s_toy = atomicAdd(A.next_toy, 1);
        __syncthreads();
        int k = s_toy;
        if (k >= A.count) return;
        if (t == 0)
            draw_toy(A.seed, A.toy_list ? A.toy_list[k] : A.first + (u64)k, M, tb.n_aux, A.lam_main, A.aux_kind, A.aux_center,
                     A.aux_sigma, row);
        // (fit_one's barrier before its first read publishes the row)
        fit_one(s_tb, s_A, A.z_starts ? A.z_starts + (long long)k * P : A.z_init, row, st, sc, smem,
                A.out + (long long)k * FIT_OUT,
                A.want_x ? A.out_x + (long long)k * P : nullptr);
    }
}

// One descent (descent.rs's `on_host`): L-BFGS-B from F.z (inside F's box, with F's sides and
// watch), then up to `passes` restarts with fresh memory from its end while each converges and
// gains more than 1e-10 relative (a restart that converges no higher takes the point); the
// restarts are not watched (F.watch is off after the first run). Leaves the end in F.z, F.g and
// f; returns the first run's status, or the last taken restart's.
// (descent_run, certify and orthant_rounds are not inlined: fit_kinked calls them from many
// places, and inlined copies made the module 1.5× larger and its first compile 1.6× longer for
// the same speed — BENCHMARKS.md, issue 23, session 29. fit_toys keeps its own inlined descent.)
__device__ __noinline__ int descent_run(Fit& F, int passes, double& f, int& iters, int& evals, double& bounded) {
    const int t = threadIdx.x, T = blockDim.x, P = F.tb->n_params;
    double *z = F.z, *g = F.g;
    f = eval_z(*F.tb, *F.A, z, g, F.row, F.sc, F.red, F.wall, F.side) + F.cst;
    ++evals;
    int status = descend(F, f, iters, evals, bounded);
    __syncthreads();
    if (t == 0) F.watch = -1;
    __syncthreads();
    for (int p = 0; p < passes && status == FIT_CONVERGED; ++p) {
        for (int i = t; i < P; i += T) {
            F.zb4[i] = z[i];
            F.gb4[i] = g[i];
        }
        const double f_run = f;
        double f2 = f;
        // (The host's restart evaluates at its start again: the same point, the same bits.)
        ++evals;
        int s2 = descend(F, f2, iters, evals, bounded);
        const double gain = f_run - f2;
        if (s2 == FIT_CONVERGED && f2 <= f_run) {
            f = f2;
        } else {
            for (int i = t; i < P; i += T) {
                z[i] = F.zb4[i];
                g[i] = F.gb4[i];
            }
            f = f_run;
        }
        if (gain <= 1e-10 * fmax(fabs(f), 1.0)) break;
        __syncthreads();
    }
    return status;
}

// The first-order check of a point z (kinks.rs's `certificate`): the gradient with every kinked
// coordinate at its kink (|z| ≤ AT_KINK) on its upper side (+1e-150) into `gu`, then on its lower
// side into `gd` (the same where none is at its kink). `held` flags (≠ 0) the parameters the fit
// does not move, `plo`..`phi` are the fit's bounds; `side` is scratch (n values). The largest
// projected gradient component over the coordinates off their kink (`smooth`), with the slopes
// that descend from a kink (`pg`), and over the kinked coordinates alone (`kinked`); the
// largest descending slope at a kink (`slope`); all +inf where a gradient is not finite (`bad`).
struct Cert {
    double pg, smooth, kinked, slope;
    bool bad;
};

__device__ __noinline__ Cert certify(Fit& F, const double* held, const double* plo, const double* phi, const double* z,
                        double* zc, double* gu, double* gd, double* side) {
    const Tables& tb = *F.tb;
    const FitArgs& A = *F.A;
    const int t = threadIdx.x, T = blockDim.x, P = tb.n_params;
    double* red = F.red;
    double any_at = 0.0;
    for (int i = t; i < P; i += T) {
        const bool at = held[i] == 0.0 && A.kink[i] && fabs(z[i]) <= AT_KINK;
        zc[i] = at ? 0.0 : z[i];
        side[i] = held[i] != 0.0 ? 2.0 : (at ? 1.0 : 0.0);
        if (at) any_at = 1.0;
    }
    any_at = block_max(any_at, red);
    eval_z(tb, A, zc, gu, F.row, F.sc, red, F.wall, side);
    if (any_at > 0.0) {
        for (int i = t; i < P; i += T)
            if (side[i] == 1.0) side[i] = -1.0;
        eval_z(tb, A, zc, gd, F.row, F.sc, red, F.wall, side);
    } else {
        for (int i = t; i < P; i += T) gd[i] = gu[i];
    }
    Cert c;
    double bad = 0.0;
    for (int i = t; i < P; i += T)
        if (held[i] == 0.0 && !(isfinite(gu[i]) && isfinite(gd[i]))) bad = 1.0;
    c.bad = block_max(bad, red) > 0.0;
    if (c.bad) {
        c.pg = c.smooth = c.kinked = c.slope = 1.0 / 0.0;
        return c;
    }
    double sm = 0.0, kk = 0.0, sl = 0.0;
    for (int i = t; i < P; i += T) {
        if (held[i] != 0.0) continue;
        if (!(A.kink[i] && fabs(z[i]) <= AT_KINK)) {
            const double moved = fabs(fmin(fmax(z[i] - gu[i], plo[i]), phi[i]) - z[i]);
            sm = fmax(sm, moved);
            if (A.kink[i]) kk = fmax(kk, moved);
        } else {
            if (phi[i] > 0.0 && gu[i] < 0.0) sl = fmax(sl, -gu[i]);
            if (plo[i] < 0.0 && gd[i] > 0.0) sl = fmax(sl, gd[i]);
        }
    }
    block_max3(sm, sl, kk, red);
    c.smooth = sm;
    c.slope = sl;
    c.kinked = fmax(kk, c.slope);
    c.pg = fmax(c.smooth, c.slope);
    return c;
}

// The evaluation count of certify at z: 2 where a kinked coordinate sits at its kink, else 1.
__device__ int cert_evals(const Fit& F, const double* held, const double* z) {
    const int t = threadIdx.x, T = blockDim.x, P = F.tb->n_params;
    double any_at = 0.0;
    for (int i = t; i < P; i += T)
        if (held[i] == 0.0 && F.A->kink[i] && fabs(z[i]) <= AT_KINK) any_at = 1.0;
    return block_max(any_at, F.red) > 0.0 ? 2 : 1;
}

// The orthant rounds that settle a point at its kinks (histfit-compute's Settle; kinks.rs's
// `orthant_rounds`, ported step for step) from F.z (f, status), within the rounds' box slo..shi:
// while the point is not converged or its check (certify, on the fit's bounds plo..phi) fails
// over the kinked coordinates (ORTHANT_PG), every kinked coordinate is kept to its side — off
// its kink the side it is on, at its kink the side whose slope descends (the steeper; the lower
// on a tie) where the box allows it, held at 0 where neither does — and L-BFGS-B descends once
// more (no restarts). A lower or equal end replaces the point; the rounds stop where it is higher,
// or equal and unmoved. `pb` flags the coordinates held at their kink at the end: `pin_in`'s
// (0 where null) unless a round replaced the point, then that round's. Returns the rounds that
// replaced it. Uses the state's n-vectors 16, 18–20 and the trial point (zt); the descent box and
// sides (13–15) are overwritten.
__device__ __noinline__ int orthant_rounds(Fit& F, double* st, const double* held, const double* plo, const double* phi,
                              const double* slo, const double* shi, const double* pin_in, double* pb, double& f,
                              int& status, int& iters, int& evals, double& bounded) {
    const Tables& tb = *F.tb;
    const FitArgs& A = *F.A;
    const int t = threadIdx.x, T = blockDim.x, P = tb.n_params;
    double *lo_d = st + 13 * (long long)P, *hi_d = lo_d + P, *side_d = hi_d + P;
    double *zb = st + 16 * (long long)P, *pr = zb + 2 * (long long)P, *gu = pr + P, *gd = gu + P;
    double *z = F.z, *g = F.g, *red = F.red;
    for (int i = t; i < P; i += T) pb[i] = pin_in ? pin_in[i] : 0.0;
    int taken = 0;
    for (int round = 0; round < ORTHANT_ROUNDS; ++round) {
        if (!isfinite(f)) break;
        evals += cert_evals(F, held, z);
        const Cert c = certify(F, held, plo, phi, z, F.zt, gu, gd, side_d);
        if (status == FIT_CONVERGED && c.kinked <= ORTHANT_PG) break;
        // The round: each kinked coordinate kept to its side within the rounds' box.
        for (int i = t; i < P; i += T) {
            zb[i] = z[i];
            pr[i] = 0.0;
            double lo = slo[i], hi = shi[i], zi = z[i], sd = 0.0;
            if (held[i] != 0.0) {
                lo_d[i] = lo;
                hi_d[i] = hi;
                side_d[i] = 2.0;
                continue;
            }
            if (A.kink[i]) {
                if (fabs(zi) <= AT_KINK) {
                    zi = 0.0;
                    const bool up = !c.bad && phi[i] > 0.0 && gu[i] < 0.0 && hi > 0.0;
                    const bool dn = !c.bad && plo[i] < 0.0 && gd[i] > 0.0 && lo < 0.0;
                    if (up && dn) sd = gd[i] >= -gu[i] ? -1.0 : 1.0;
                    else if (up) sd = 1.0;
                    else if (dn) sd = -1.0;
                } else {
                    sd = zi > 0.0 ? 1.0 : -1.0;
                }
                if (sd > 0.0) lo = fmax(lo, 0.0);
                else if (sd < 0.0) hi = fmin(hi, 0.0);
                else { lo = 0.0; hi = 0.0; zi = 0.0; pr[i] = 1.0; }
            }
            lo_d[i] = lo;
            hi_d[i] = hi;
            side_d[i] = sd;
            z[i] = fmin(fmax(zi, lo), hi);
        }
        const double fb = f;
        const int sb = status;
        double fr = 0.0;
        int sr = descent_run(F, 0, fr, iters, evals, bounded);
        if (sr == FIT_FAILED_START) fr = 0.0 / 0.0;
        const double tol = 1e-12 * fmax(fabs(fb), 1.0);
        const bool lower = fr < fb - tol, tie = fr <= fb + tol;
        if (!(isfinite(fr) && (lower || tie))) {
            for (int i = t; i < P; i += T) z[i] = zb[i];
            f = fb;
            status = sb;
            __syncthreads();
            break;
        }
        double moved = 0.0;
        for (int i = t; i < P; i += T) {
            if (!(z[i] == zb[i])) moved = 1.0;
            pb[i] = pr[i];
        }
        moved = block_max(moved, red);
        f = fr;
        status = sr;
        ++taken;
        if (!lower && moved == 0.0) break;
    }
    return taken;
}

// One descent of fit_runs: histfit-infer's descent.rs (`on_host`) on the device. L-BFGS-B from the
// descent's start within its own box, its kinked coordinates at 0 evaluated on their side, given
// up where its watch says so, then up to `passes` restarts with fresh memory from its end while
// each converges and gains (a restart that converges no higher takes the point), then, where
// asked, the orthant rounds that settle it at its kinks (orthant_rounds); or, where asked instead,
// Newton steps from the start (polish). Writes f, the rounds taken, iterations, evaluations and
// status at `o` (FIT_OUT values) and the end point z at `oz`.
__device__ void run_one(const Tables& tb, const FitArgs& A, int r, double* st, double* sc, double* red, double* o,
                        double* oz) {
    const int t = threadIdx.x, T = blockDim.x, P = tb.n_params;
    const double* rule = A.run_rule + (long long)r * RUN_RULE;
    const double* sp = A.spaces + (long long)rule[9] * 5 * P;
    const unsigned char* code = A.run_code + (long long)r * P;
    // The descent's box and sides, decoded into the block's state (three n-vectors after the
    // 13 the fits lay out; the orthant rounds' seven follow, then S at s_off).
    double* lo_d = st + 13 * (long long)P;
    double* hi_d = lo_d + P;
    double* side_d = hi_d + P;
    for (int i = t; i < P; i += T) {
        const int c = code[i];
        const bool held = sp[4 * P + i] != 0.0;
        lo_d[i] = held ? sp[i] : ((c & RUN_LOWER_0) ? 0.0 : sp[2 * P + i]);
        hi_d[i] = held ? sp[i] : ((c & RUN_UPPER_0) ? 0.0 : sp[3 * P + i]);
        side_d[i] = held ? 2.0 : ((c & RUN_SIDE_UP) ? 1.0 : ((c & RUN_SIDE_DOWN) ? -1.0 : 0.0));
    }
    __shared__ Fit F;
    if (t == 0) {
        const double* row = A.rows + (long long)rule[6] * A.row_len;
        lay_out(F, tb, A, row, st, sc, red, lo_d, hi_d);
        F.side = side_d;
        F.D.side = side_d;
        F.watch = (int)rule[0];
        F.w_ceiling = rule[1];
        F.w_after = (int)rule[2];
        F.w_factor = rule[3];
        F.w_held = (int)rule[4];
        F.wall = rule[7];
        F.cst = rule[8];
    }
    __syncthreads();
    const double *lo = F.lo, *hi = F.hi, *side = F.side, *z0 = A.run_z + (long long)r * P;
    double *z = F.z, *g = F.g;
    // The host's coordinates are the parameters not held (side 2): the optimizer's count of them
    // and whether one has a kink (lbfgsb.rs's `free.len() == n` and `kinks`) are over those.
    double movable = 0.0, kinked = 0.0;
    for (int i = t; i < P; i += T) {
        z[i] = side[i] == 2.0 ? sp[i] : fmin(fmax(z0[i], lo[i]), hi[i]);
        if (side[i] != 2.0) {
            movable += 1.0;
            if (A.kink[i]) kinked = 1.0;
        }
    }
    const int n_movable = (int)block_sum(movable, red);
    const bool any_kink = block_max(kinked, red) > 0.0;
    if (t == 0) {
        F.D.n_movable = n_movable;
        F.D.any_kink = any_kink;
    }
    if (rule[11] != 0.0) {
        // Newton steps in place of a descent (DescentRequest::polish), from z with f given.
        double f = rule[12];
        int evals = 0;
        polish(F, f, evals);
        for (int i = t; i < P; i += T) oz[i] = z[i];
        if (t == 0) {
            o[0] = f;
            o[1] = 0.0;
            o[4] = 0.0;
            o[5] = (double)evals;
            o[6] = (double)FIT_CONVERGED;
        }
        return;
    }
    int evals = 0, iters = 0;
    double bounded = 0.0, f = 0.0;
    int status = descent_run(F, (int)rule[5], f, iters, evals, bounded);
    int taken = 0;
    const bool settle = rule[10] != 0.0;
    double* pb = st + 17 * (long long)P;
    if (settle) {
        // The rounds' box (the fit's bounds, or 0 where the codes say so) into n-vectors 21, 22.
        double *slo = st + 21 * (long long)P, *shi = slo + P;
        for (int i = t; i < P; i += T) {
            const bool held = sp[4 * P + i] != 0.0;
            slo[i] = held ? sp[i] : ((code[i] & RUN_SETTLE_LOWER_0) ? 0.0 : sp[2 * P + i]);
            shi[i] = held ? sp[i] : ((code[i] & RUN_SETTLE_UPPER_0) ? 0.0 : sp[3 * P + i]);
        }
        __syncthreads();
        taken = orthant_rounds(F, st, sp + 4 * P, sp + 2 * P, sp + 3 * P, slo, shi, nullptr, pb, f, status, iters,
                               evals, bounded);
    }
    // A settled end flags the coordinates its last round held at their kink as −0 (every other
    // 0 is +0): the host reads them back from the signs.
    for (int i = t; i < P; i += T)
        oz[i] = !settle ? z[i] : (taken > 0 && pb[i] != 0.0 ? -0.0 : (z[i] == 0.0 ? 0.0 : z[i]));
    if (t == 0) {
        o[0] = status == FIT_FAILED_START ? 0.0 / 0.0 : f;
        o[1] = (double)taken;
        o[4] = (double)iters;
        o[5] = (double)evals;
        o[6] = (double)status;
    }
}

// Descents of host fits (histfit-compute's DescentRequest), one per block at a time, each on its
// dataset row: as fit_toys, without drawing toys.
// (Launch bounds for 2 blocks per SM: the register cap of 4 spilled three times as much, and a
// launch of descents waits on its slowest one, not on the device's throughput.)
extern "C" __global__ void __launch_bounds__(256, RUN_MIN_BLOCKS) fit_runs(Tables tb, FitArgs A) {
    extern __shared__ double smem[];
    __shared__ int s_run;
    const int t = threadIdx.x;
    double* st = A.state + (long long)blockIdx.x * A.state_len;
    double* sc = A.scratch + (long long)blockIdx.x * A.scratch_len;
    __shared__ Tables s_tb;
    __shared__ FitArgs s_A;
    if (t == 0) {
        s_tb = tb;
        s_A = A;
    }
    for (;;) {
        __syncthreads();
        if (t == 0) s_run = atomicAdd(A.next_toy, 1);
        __syncthreads();
        int k = s_run;
        if (k >= A.count) return;
        // Each descent's scales (its fit's units; 1 for the held parameters), published by
        // run_one's first barrier.
        if (t == 0) s_A.scale = A.spaces + ((long long)A.run_rule[(long long)k * RUN_RULE + 9] * 5 + 1) * tb.n_params;
        run_one(s_tb, s_A, k, st, sc, smem, A.out + (long long)k * FIT_OUT, A.out_x + (long long)k * tb.n_params);
    }
}

// ---------------------------------------------------------------------------------------------
// Kinked toy fits resident on the device (fit_toys_kinked): a toy's whole fit under
// interpolations with kinks, as histfit-infer's fit makes it (fit/mod.rs's `minimise_async`
// with no further starts): the start (the model's initial point where −ln L is not finite at
// the requested one), the local search (search.rs's `local_minimum`: the descents on wider
// empty-bin walls, a descent with restarts, the saddle probe, then kinks.rs's `settle_kinks`:
// orthant rounds, the slopes into the other side of every kink, the greedy flip and the refits
// of the other sides), the searches of the other side of kinks near their kink
// (`compare_near_kinks`), the finish's first round (polish.rs's `finish`: what needs more goes to
// the host, as in fit_one), `sharpen` and the verdict. Every
// rule is the host's, in the same order; the lists (candidates, searches) are kept by thread 0
// in the block's state and published by barriers. The block's state past the 23 n-vectors of
// fit_runs holds the fit's points (see KState).

// A status the host's fits give in words only: a point reached by flipping kinked parameters
// across their kinks, not yet descended from (kinks.rs's `flip_greedily`); not converged.
#define FIT_FLIPPED 100

// Where a kinked toy fit keeps its points and lists (n-vectors of its state from 23 on).
struct KState {
    double *held, *plain;          // 1 where the fit holds a parameter; sides of plain evaluations (2: held)
    double *zB, *pB, *zS, *pS, *zR, *pR; // points: the best, a copy it started from, a result; their pins
    double *z0, *wz, *loP, *hiP, *pT; // the local search's start, a work point, a search's box and pins
    double *lK, *lS, *lV;          // candidates: coordinate, side, slope
    double *cK, *cS, *cV;          // candidates carried over after a flip
    double *sKS;                   // (coordinate, side) pairs searched near kinks, at 2j and 2j + 1
    double *fl;                    // flags: flipped coordinates, or those the saddle probe takes
    double *nK, *nT;               // the near-kink list: coordinate, θ
};

// The n-vectors each part takes (lists of candidates hold up to 2 n entries: two sides of every
// kinked coordinate at its kink; the searched pairs up to 1.5 n), in KState's order from 23 on:
// resident.rs's StateLayout makes room for them (KINKED_VECTORS).
__device__ KState kstate_of(double* st, int P) {
    KState k;
    double* b = st + 23 * (long long)P;
    double** v[] = {&k.held, &k.plain, &k.zB, &k.pB, &k.zS, &k.pS, &k.zR, &k.pR, &k.z0, &k.wz, &k.loP, &k.hiP,
                    &k.pT, &k.lK, &k.lS, &k.lV, &k.cK, &k.cS, &k.cV, &k.sKS, &k.fl, &k.nK, &k.nT};
    const int len[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 1, 1, 1};
    for (int j = 0; j < 23; ++j) {
        *v[j] = b;
        b += (long long)len[j] * P;
    }
    return k;
}

// The kinked fit's scalars and list lengths, one copy for the block (thread 0 writes them).
struct KScal {
    double fB, fS, fR;
    int sB, sS, sR;
    int nL, nC, nS, nN;
    int found_k;
    double found_side;
};

__device__ bool k_better(double fa, int sa, double fb, int sb) {
    // search.rs's `better_than`.
    if (isfinite(fa) && !isfinite(fb)) return true;
    if (!isfinite(fa)) return false;
    const bool ca = sa == FIT_CONVERGED, cb = sb == FIT_CONVERGED;
    if (ca != cb) return ca ? fa <= fb + 5e-7 : fa < fb - 5e-7;
    return fa < fb - 1e-12 * fmax(fabs(fb), 1.0);
}

__device__ void k_copy(double* to, const double* from, int P) {
    for (int i = threadIdx.x; i < P; i += blockDim.x) to[i] = from[i];
}

// Whether a and b are equal at every coordinate (NaN differs), every thread alike.
__device__ bool k_same(const double* a, const double* b, int P, double* red) {
    double d = 0.0;
    for (int i = threadIdx.x; i < P; i += blockDim.x)
        if (!(a[i] == b[i])) d = 1.0;
    return block_max(d, red) == 0.0;
}

__device__ __noinline__ void fit_kinked(const Tables& tb, const FitArgs& A, const double* z_init, const double* row, double* st,
                           double* sc, double* red, double* o, double* ox) {
    const int t = threadIdx.x, T = blockDim.x, P = tb.n_params;
    __shared__ Fit F;
    __shared__ KScal s;
    double *lo_d = st + 13 * (long long)P, *hi_d = lo_d + P, *side_d = hi_d + P;
    double *gu = st + 19 * (long long)P, *gd = gu + P, *pb = st + 17 * (long long)P;
    const KState K = kstate_of(st, P);
    const double *plo = A.z_lo, *phi = A.z_hi;
    if (t == 0) {
        lay_out(F, tb, A, row, st, sc, red, lo_d, hi_d);
        F.side = side_d;
        F.D.side = side_d;
        F.watch = -1;
        F.cst = 0.0;
        F.wall = EMPTY_BIN_WALL;
        // A block's lists start empty for each toy (the previous toy's would be read otherwise).
        s.nL = s.nC = s.nS = s.nN = 0;
        s.found_k = -1;
    }
    __syncthreads();
    double *z = F.z;
    double movable = 0.0, kinked = 0.0;
    for (int i = t; i < P; i += T) {
        const bool held = !(plo[i] < phi[i]);
        K.held[i] = held ? 1.0 : 0.0;
        K.plain[i] = held ? 2.0 : 0.0;
        if (!held) {
            movable += 1.0;
            if (A.kink[i]) kinked = 1.0;
        }
    }
    const int n_movable = (int)block_sum(movable, red);
    const bool any_kink = block_max(kinked, red) > 0.0;
    if (t == 0) {
        F.D.n_movable = n_movable;
        F.D.any_kink = any_kink;
    }
    int evals = 0, iters = 0;
    double bounded = 0.0;
    // -- helpers -----------------------------------------------------------------------------
    // The descent box and sides: lo..hi (null: the fit's), sides plain.
    const auto set_box = [&](const double* lo, const double* hi) {
        for (int i = t; i < P; i += T) {
            lo_d[i] = lo ? lo[i] : plo[i];
            hi_d[i] = hi ? hi[i] : phi[i];
            side_d[i] = K.plain[i];
        }
    };
    // f (and the gradient into F.gt) at w, sides plain.
    const auto f_at = [&](const double* w) {
        ++evals;
        return eval_z(tb, A, w, F.gt, row, sc, red, F.wall, K.plain);
    };
    // A descent from w within the box set, `passes` restarts, held at `pins` (coordinates with a
    // flag there get bounds 0..0 and start at 0; null: none): search.rs's `descend_request`.
    const auto descent = [&](const double* w, const double* pins, int passes, double& f) {
        for (int i = t; i < P; i += T) {
            if (pins && pins[i] != 0.0) {
                lo_d[i] = 0.0;
                hi_d[i] = 0.0;
            }
            z[i] = (pins && pins[i] != 0.0) ? 0.0 : fmin(fmax(w[i], lo_d[i]), hi_d[i]);
        }
        return descent_run(F, passes, f, iters, evals, bounded);
    };
    // Orthant rounds from F.z (f, status) within lo..hi (null: the fit's), pins from `pin_in`
    // into pb.
    const auto rounds = [&](const double* lo, const double* hi, const double* pin_in, double& f, int& status) {
        __syncthreads();
        return orthant_rounds(F, st, K.held, plo, phi, lo ? lo : plo, hi ? hi : phi, pin_in, pb, f, status, iters,
                              evals, bounded);
    };
    // Slot copies: F.z with pins pb into (zX, pX).
    const auto keep = [&](double* zx, double* px, const double* pins) {
        for (int i = t; i < P; i += T) {
            zx[i] = z[i];
            px[i] = pins ? pins[i] : 0.0;
        }
    };
    // search.rs's `descend_settled` from w within lo..hi (null: the fit's) with pins: into F.z, pb.
    const auto descend_settled = [&](const double* w, const double* lo, const double* hi, const double* pins,
                                     double& f, int& status) {
        set_box(lo, hi);
        __syncthreads();
        status = descent(w, pins, 4, f);
        if (status == FIT_FAILED_START) f = 0.0 / 0.0;
        rounds(lo, hi, pins, f, status);
    };
    // polish.rs's `polish` of (zB, fB): Newton steps in the fit's box.
    const auto polish_best = [&]() {
        set_box(nullptr, nullptr);
        k_copy(z, K.zB, P);
        __syncthreads();
        double f = s.fB;
        polish(F, f, evals);
        __syncthreads();
        k_copy(K.zB, z, P);
        if (t == 0) s.fB = f;
        __syncthreads();
    };
    // polish.rs's `descend_again` of the best point: kept where it converges (or its line search
    // stops) no higher.
    const auto descend_again = [&]() {
        double f = 0.0;
        int status = 0;
        descend_settled(K.zB, nullptr, nullptr, K.pB, f, status);
        const bool kept = (status == FIT_CONVERGED || status == FIT_FAILED_LINE_SEARCH) && isfinite(f) &&
                          f <= s.fB + 1e-12 * fmax(fabs(s.fB), 1.0);
        __syncthreads();
        if (kept) {
            keep(K.zB, K.pB, pb);
            if (t == 0) {
                s.fB = f;
                s.sB = status;
            }
        }
        __syncthreads();
        return kept;
    };
    // -- the start (fit/mod.rs's search_starts, one start) ----------------------------------
    for (int i = t; i < P; i += T) K.z0[i] = fmin(fmax(z_init[i], plo[i]), phi[i]);
    __syncthreads();
    if (!isfinite(f_at(K.z0))) {
        double differs = 0.0;
        for (int i = t; i < P; i += T) {
            K.wz[i] = fmin(fmax(A.z_model[i], plo[i]), phi[i]);
            if (K.wz[i] != K.z0[i]) differs = 1.0;
        }
        if (block_max(differs, red) > 0.0 && isfinite(f_at(K.wz))) k_copy(K.z0, K.wz, P);
        __syncthreads();
    }
    // -- local_minimum ------------------------------------------------------------------------
    {
        double empty = 0.0;
        for (int b = t; b < tb.n_main; b += T)
            if (row[b] == 0.0) empty = 1.0;
        const bool soft = block_max(empty, red) > 0.0;
        k_copy(K.wz, K.z0, P);
        if (soft) {
            for (int stage = 0; stage < 2; ++stage) {
                if (t == 0) F.wall = stage == 0 ? SOFT_WALL_0 : SOFT_WALL_1;
                set_box(nullptr, nullptr);
                __syncthreads();
                double f = 0.0;
                descent(K.wz, nullptr, 0, f);
                if (isfinite(f)) k_copy(K.wz, z, P);
                __syncthreads();
            }
            if (t == 0) F.wall = EMPTY_BIN_WALL;
        }
        set_box(nullptr, nullptr);
        __syncthreads();
        double fL = 0.0;
        int sL = descent(K.wz, nullptr, 4, fL);
        if (sL == FIT_FAILED_START) fL = 0.0 / 0.0;
        keep(K.zB, K.pB, nullptr);
        if (t == 0) {
            s.fB = fL;
            s.sB = sL;
        }
        __syncthreads();
        // search.rs's leave_saddle: coordinates the descent left where they started, off kinks and
        // bounds, probed a step to either side from its end.
        if (isfinite(s.fB) && !k_same(K.zB, K.z0, P, red)) {
            for (int i = t; i < P; i += T)
                K.fl[i] = (K.held[i] == 0.0 && K.zB[i] == K.z0[i] && !A.kink[i] && plo[i] < K.z0[i] &&
                           K.z0[i] < phi[i])
                              ? 1.0
                              : 0.0;
            k_copy(K.wz, K.zB, P);
            __syncthreads();
            const double res = 1e-12 * fmax(fabs(s.fB), 1.0);
            bool moved = false;
            for (int k = 0; k < P; ++k) {
                if (K.fl[k] == 0.0) continue;
                double best_f = s.fB - res, best_z = K.zB[k];
                for (int side = 1; side >= -1; side -= 2) {
                    const double v = fmin(fmax(K.zB[k] + side * SADDLE_STEP, plo[k]), phi[k]);
                    k_copy(F.zt, K.zB, P);
                    if (t == k % T) F.zt[k] = v;
                    __syncthreads();
                    const double fs = f_at(F.zt);
                    if (fs < best_f) {
                        best_f = fs;
                        best_z = v;
                    }
                }
                if (best_z != K.wz[k]) {
                    __syncthreads();
                    if (t == k % T) K.wz[k] = best_z;
                    moved = true;
                }
                __syncthreads();
            }
            if (moved) {
                set_box(nullptr, nullptr);
                __syncthreads();
                double fa = 0.0;
                int sa = descent(K.wz, nullptr, 4, fa);
                if (sa == FIT_FAILED_START) fa = 0.0 / 0.0;
                const bool take = k_better(fa, sa, s.fB, s.sB);
                __syncthreads();
                if (take) {
                    keep(K.zB, K.pB, nullptr);
                    if (t == 0) {
                        s.fB = fa;
                        s.sB = sa;
                    }
                }
                __syncthreads();
            }
        }
    }
    // -- settle_kinks -------------------------------------------------------------------------
    // Orthant rounds from the best point in the fit's box, into it.
    const auto settle_best = [&]() {
        set_box(nullptr, nullptr);
        k_copy(z, K.zB, P);
        double f = s.fB;
        int status = s.sB;
        rounds(nullptr, nullptr, K.pB, f, status);
        __syncthreads();
        keep(K.zB, K.pB, pb);
        if (t == 0) {
            s.fB = f;
            s.sB = status;
        }
        __syncthreads();
    };
    if (any_kink) {
        settle_best();
        if (isfinite(s.fB)) {
            bool scan = true, flipped = false;
            for (int it = 0; it < 4; ++it) {
                evals += cert_evals(F, K.held, K.zB);
                const Cert c = certify(F, K.held, plo, phi, K.zB, F.zt, gu, gd, side_d);
                if (scan) {
                    // kinks.rs's other_sides: the slope from the kink into the other side of every
                    // kinked coordinate off its kink, one gradient each.
                    if (t == 0) s.nL = 0;
                    __syncthreads();
                    for (int k = 0; k < P; ++k) {
                        if (K.held[k] != 0.0 || !A.kink[k] || !(fabs(K.zB[k]) > AT_KINK) || K.pB[k] != 0.0) continue;
                        const double side = K.zB[k] > 0.0 ? -1.0 : 1.0;
                        if ((side > 0.0 && phi[k] <= 0.0) || (side < 0.0 && plo[k] >= 0.0)) continue;
                        k_copy(F.zt, K.zB, P);
                        for (int i = t; i < P; i += T) side_d[i] = K.plain[i];
                        if (t == k % T) {
                            F.zt[k] = 0.0;
                            side_d[k] = side;
                        }
                        ++evals;
                        const double f0 = eval_z(tb, A, F.zt, F.gt, row, sc, red, F.wall, side_d);
                        __syncthreads();
                        const double slope = -side * F.gt[k];
                        if (t == 0 && isfinite(f0) && slope > SIDE_SLOPE) {
                            K.lK[s.nL] = k;
                            K.lS[s.nL] = side;
                            K.lV[s.nL] = slope;
                            ++s.nL;
                        }
                        __syncthreads();
                    }
                } else if (t == 0) {
                    s.nL = 0;
                    for (int j = 0; j < s.nC; ++j) {
                        const int k = (int)K.cK[j];
                        if (K.zB[k] * K.cS[j] < -AT_KINK) {
                            K.lK[s.nL] = k;
                            K.lS[s.nL] = K.cS[j];
                            K.lV[s.nL] = K.cV[j];
                            ++s.nL;
                        }
                    }
                    s.nC = 0;
                }
                scan = false;
                __syncthreads();
                if (t == 0) {
                    // The certificate's descending sides at kinks, steeper than SIDE_SLOPE, not
                    // listed yet; then the list by slope, steepest first (a stable sort).
                    for (int k = 0; k < P && !c.bad; ++k) {
                        if (K.held[k] != 0.0 || !A.kink[k] || !(fabs(K.zB[k]) <= AT_KINK)) continue;
                        for (int u = 0; u < 2; ++u) {
                            const double side = u == 0 ? 1.0 : -1.0;
                            const double slope = u == 0 ? -gu[k] : gd[k];
                            const bool desc = u == 0 ? (phi[k] > 0.0 && gu[k] < 0.0) : (plo[k] < 0.0 && gd[k] > 0.0);
                            if (!desc || !(slope > SIDE_SLOPE)) continue;
                            bool listed = false;
                            for (int j = 0; j < s.nL; ++j)
                                if ((int)K.lK[j] == k && K.lS[j] == side) listed = true;
                            if (!listed) {
                                K.lK[s.nL] = k;
                                K.lS[s.nL] = side;
                                K.lV[s.nL] = slope;
                                ++s.nL;
                            }
                        }
                    }
                    for (int j = 1; j < s.nL; ++j) {
                        const double k0 = K.lK[j], s0 = K.lS[j], v0 = K.lV[j];
                        int q = j - 1;
                        while (q >= 0 && K.lV[q] < v0) {
                            K.lK[q + 1] = K.lK[q];
                            K.lS[q + 1] = K.lS[q];
                            K.lV[q + 1] = K.lV[q];
                            --q;
                        }
                        K.lK[q + 1] = k0;
                        K.lS[q + 1] = s0;
                        K.lV[q + 1] = v0;
                    }
                }
                __syncthreads();
                const int nL = s.nL;
                if (nL == 0) break;
                if (!flipped && nL > 1) {
                    flipped = true;
                    // kinks.rs's flip_greedily: each candidate moved across its kink to the mirror of its
                    // value, half or twice that, where that lowers f; then orthant rounds from there.
                    k_copy(K.wz, K.zB, P);
                    for (int i = t; i < P; i += T) K.fl[i] = 0.0;
                    __syncthreads();
                    double f = s.fB;
                    int n_flipped = 0;
                    for (int j = 0; j < nL; ++j) {
                        const int k = (int)K.lK[j];
                        const double side = K.lS[j];
                        if (K.fl[k] != 0.0) continue;
                        const double m = fmax(fabs(K.zB[k]), 1e-3);
                        double best_f = f - 1e-12 * fmax(fabs(f), 1.0), best_z = K.wz[k];
                        for (int u = 0; u < 3; ++u) {
                            const double tm = u == 0 ? m : (u == 1 ? 0.5 * m : 2.0 * m);
                            const double v = fmin(fmax(side * tm, plo[k]), phi[k]);
                            k_copy(F.zt, K.wz, P);
                            if (t == k % T) F.zt[k] = v;
                            __syncthreads();
                            const double ft = f_at(F.zt);
                            if (ft < best_f) {
                                best_f = ft;
                                best_z = v;
                            }
                        }
                        if (best_z != K.wz[k]) {
                            f = best_f;
                            __syncthreads();
                            if (t == k % T) {
                                K.wz[k] = best_z;
                                K.fl[k] = 1.0;
                            }
                            ++n_flipped;
                        }
                        __syncthreads();
                    }
                    if (n_flipped > 0) {
                        set_box(nullptr, nullptr);
                        for (int i = t; i < P; i += T) {
                            z[i] = K.wz[i];
                            K.pT[i] = K.fl[i] != 0.0 ? 0.0 : K.pB[i];
                        }
                        double fr = f;
                        int sr = FIT_FLIPPED;
                        rounds(nullptr, nullptr, K.pT, fr, sr);
                        // Every thread judges against the best before thread 0 may replace it.
                        const bool better = k_better(fr, sr, s.fB, s.sB);
                        __syncthreads();
                        if (better) {
                            keep(K.zB, K.pB, pb);
                            if (t == 0) {
                                s.fB = fr;
                                s.sB = sr;
                                s.nC = 0;
                                for (int j = 0; j < nL; ++j) {
                                    if (K.fl[(int)K.lK[j]] != 0.0) continue;
                                    K.cK[s.nC] = K.lK[j];
                                    K.cS[s.nC] = K.lS[j];
                                    K.cV[s.nC] = K.lV[j];
                                    ++s.nC;
                                }
                            }
                            __syncthreads();
                            continue;
                        }
                    }
                }
                // The other side of each candidate (the steepest MAX_SIDE_REFITS), from a copy of the
                // best point: kinks.rs's side_plan, a settled descent each.
                const int n_refit = nL < MAX_SIDE_REFITS ? nL : MAX_SIDE_REFITS;
                k_copy(K.zS, K.zB, P);
                k_copy(K.pS, K.pB, P);
                if (t == 0) {
                    s.fS = s.fB;
                    s.sS = s.sB;
                }
                __syncthreads();
                bool improved = false;
                for (int j = 0; j < n_refit; ++j) {
                    const int k = (int)K.lK[j];
                    const double side = K.lS[j];
                    for (int i = t; i < P; i += T) {
                        K.loP[i] = plo[i];
                        K.hiP[i] = phi[i];
                        K.wz[i] = K.zS[i];
                        K.pT[i] = i == k ? 0.0 : K.pS[i];
                    }
                    __syncthreads();
                    if (t == 0) {
                        if (side > 0.0) K.loP[k] = fmax(K.loP[k], 0.0);
                        else K.hiP[k] = fmin(K.hiP[k], 0.0);
                        K.wz[k] = fmin(fmax(side * fmax(fabs(K.zS[k]), 1e-3), K.loP[k]), K.hiP[k]);
                    }
                    __syncthreads();
                    double f = 0.0;
                    int status = 0;
                    descend_settled(K.wz, K.loP, K.hiP, K.pT, f, status);
                    // (As for the flip: the verdict first, then thread 0's write.)
                    const bool better = k_better(f, status, s.fB, s.sB);
                    __syncthreads();
                    if (better) {
                        keep(K.zB, K.pB, pb);
                        if (t == 0) {
                            s.fB = f;
                            s.sB = status;
                        }
                        improved = true;
                    }
                    __syncthreads();
                }
                if (!improved) break;
            }
        }
    }
    // -- compare_near_kinks -------------------------------------------------------------------
    if (any_kink && isfinite(s.fB)) {
        int made = 0;
        bool replaced = false;
        if (t == 0) s.nS = 0;
        __syncthreads();
        for (;;) {
            if (t == 0) {
                s.nN = 0;
                for (int k = 0; k < P; ++k) {
                    if (K.held[k] != 0.0 || !A.kink[k] || K.pB[k] != 0.0) continue;
                    const double theta = K.zB[k] * A.scale[k];
                    if (!(fabs(theta) >= NEAR_KINK_FROM && fabs(theta) <= NEAR_KINK)) continue;
                    if (theta < 0.0 ? !(phi[k] > 0.0) : !(plo[k] < 0.0)) continue;
                    const double side = theta > 0.0 ? -1.0 : 1.0;
                    bool seen = false;
                    for (int j = 0; j < s.nS; ++j)
                        if ((int)K.sKS[2 * j] == k && K.sKS[2 * j + 1] == side) seen = true;
                    if (seen) continue;
                    K.nK[s.nN] = k;
                    K.nT[s.nN] = theta;
                    ++s.nN;
                }
                for (int j = 1; j < s.nN; ++j) {
                    const double k0 = K.nK[j], t0 = K.nT[j];
                    int q = j - 1;
                    while (q >= 0 && fabs(K.nT[q]) > fabs(t0)) {
                        K.nK[q + 1] = K.nK[q];
                        K.nT[q + 1] = K.nT[q];
                        --q;
                    }
                    K.nK[q + 1] = k0;
                    K.nT[q + 1] = t0;
                }
                const int left = MAX_NEAR_SEARCHES - made;
                if (s.nN > left) s.nN = left;
                s.found_k = -1;
                s.fS = s.fB;
                s.sS = s.sB;
            }
            k_copy(K.zS, K.zB, P);
            k_copy(K.pS, K.pB, P);
            __syncthreads();
            const int nN = s.nN;
            for (int j = 0; j < nN; ++j) {
                const int k = (int)K.nK[j];
                const double side = K.nT[j] > 0.0 ? -1.0 : 1.0;
                if (t == 0) {
                    K.sKS[2 * s.nS] = k;
                    K.sKS[2 * s.nS + 1] = side;
                    ++s.nS;
                }
                ++made;
                // kinks.rs's near_plan: the other side, the pins of the start held at 0, a watched
                // descent given up above the start.
                for (int i = t; i < P; i += T) {
                    K.loP[i] = K.pS[i] != 0.0 ? 0.0 : plo[i];
                    K.hiP[i] = K.pS[i] != 0.0 ? 0.0 : phi[i];
                    K.wz[i] = K.pS[i] != 0.0 ? 0.0 : K.zS[i];
                }
                __syncthreads();
                if (t == 0) {
                    if (side > 0.0) K.loP[k] = fmax(plo[k], 0.0);
                    else K.hiP[k] = fmin(phi[k], 0.0);
                    if (K.pS[k] != 0.0) {
                        K.loP[k] = 0.0;
                        K.hiP[k] = 0.0;
                    }
                    K.wz[k] = fmin(fmax(side * fmax(fabs(K.zS[k]), 1e-3), K.loP[k]), K.hiP[k]);
                    F.watch = k;
                    F.w_ceiling = s.fS + 5e-7;
                    F.w_after = NEAR_ABANDON_AFTER;
                    F.w_factor = NEAR_ABANDON_FACTOR;
                    F.w_held = NEAR_HELD;
                }
                // Thread 0's bounds of k published before thread k % T copies them.
                __syncthreads();
                set_box(K.loP, K.hiP);
                __syncthreads();
                if (t == k % T) side_d[k] = side;
                __syncthreads();
                double f = 0.0;
                int status = descent(K.wz, nullptr, 0, f);
                __syncthreads();
                if (t == 0) F.watch = -1;
                __syncthreads();
                if (status == FIT_GAVE_UP) continue;
                k_copy(K.wz, z, P);
                __syncthreads();
                descend_settled(K.wz, K.loP, K.hiP, K.pS, f, status);
                __syncthreads();
                if (k_better(f, status, s.fB, s.sB)) {
                    keep(K.zR, K.pR, pb);
                    if (t == 0) {
                        s.fR = f;
                        s.sR = status;
                        s.found_k = k;
                        s.found_side = side;
                    }
                    __syncthreads();
                    break;
                }
            }
            __syncthreads();
            if (s.found_k < 0) break;
            k_copy(K.zB, K.zR, P);
            k_copy(K.pB, K.pR, P);
            __syncthreads();
            if (t == 0) {
                s.fB = s.fR;
                s.sB = s.sR;
                K.sKS[0] = s.found_k;
                K.sKS[1] = -s.found_side;
                s.nS = 1;
            }
            replaced = true;
            __syncthreads();
        }
        if (replaced) settle_best();
    }
    // -- finish and sharpen (polish.rs) ---------------------------------------------------------
    double pg = 1.0 / 0.0;
    bool to_host = false;
    if (isfinite(s.fB)) {
        evals += cert_evals(F, K.held, K.zB);
        Cert c = certify(F, K.held, plo, phi, K.zB, F.zt, gu, gd, side_d);
        // (A check whose gradient is not finite lists no descending sides: kinks_certified.)
        const auto kink_ok = [&](const Cert& q) { return q.bad || q.slope <= A.certify; };
        const auto certified = [&](const Cert& q) { return q.pg <= A.certify && kink_ok(q); };
        // The finish's first round (as fit_one's): Newton steps; a stopped line search, or a
        // point the round leaves uncertified, goes to the host's further rounds.
        const bool stalled0 = s.sB == FIT_FAILED_LINE_SEARCH && isfinite(s.fB);
        if (((s.sB == FIT_CONVERGED && c.smooth > A.certify) || stalled0) && kink_ok(c)) {
            if (stalled0) {
                to_host = true;
            } else {
                k_copy(K.wz, K.zB, P);
                __syncthreads();
                polish_best();
                if (!k_same(K.zB, K.wz, P, red)) {
                    evals += cert_evals(F, K.held, K.zB);
                    c = certify(F, K.held, plo, phi, K.zB, F.zt, gu, gd, side_d);
                }
                to_host = !certified(c);
            }
        }
        // sharpen
        const bool stalled = s.sB == FIT_FAILED_LINE_SEARCH && isfinite(s.fB);
        if (!to_host && (s.sB == FIT_CONVERGED || stalled) && kink_ok(c) && c.pg > A.polish_pg &&
            c.pg <= A.certify) {
            k_copy(K.zS, K.zB, P);
            k_copy(K.pS, K.pB, P);
            if (t == 0) {
                s.fS = s.fB;
                s.sS = s.sB;
            }
            __syncthreads();
            polish_best();
            if (!k_same(K.zB, K.zS, P, red)) {
                evals += cert_evals(F, K.held, K.zB);
                Cert again = certify(F, K.held, plo, phi, K.zB, F.zt, gu, gd, side_d);
                if (!certified(again) && s.fB < s.fS && descend_again()) {
                    polish_best();
                    evals += cert_evals(F, K.held, K.zB);
                    again = certify(F, K.held, plo, phi, K.zB, F.zt, gu, gd, side_d);
                }
                if (certified(again)) {
                    c = again;
                } else {
                    k_copy(K.zB, K.zS, P);
                    k_copy(K.pB, K.pS, P);
                    __syncthreads();
                    if (t == 0) {
                        s.fB = s.fS;
                        s.sB = s.sS;
                    }
                }
            }
        }
        pg = c.pg;
    }
    __syncthreads();
    // The verdict (fit/mod.rs's `verdict`): a converged fit is one whose point is certified; a
    // stopped line search at a certified point is one too. A point the host's words alone describe
    // (FIT_FLIPPED) comes back uncertified, so the host fits that toy again.
    int status = s.sB;
    const double f = s.fB;
    const bool stalled = status == FIT_FAILED_LINE_SEARCH && isfinite(f);
    if (evals >= A.fit_evaluations) to_host = true;  // (its budget reached: fit_one's rule)
    if (to_host) status = FIT_UNCERTIFIED;
    else if ((status == FIT_CONVERGED || stalled) && pg <= A.certify) status = FIT_CONVERGED;
    else if (status == FIT_CONVERGED || status == FIT_FLIPPED) status = FIT_UNCERTIFIED;
    // (None left at its start: the saddle probe above moved or kept them itself.)
    write_fit(tb, A, row, K.zB, plo, phi, isfinite(f) ? f : 0.0 / 0.0, pg, iters, evals, status, 0.0, bounded, sc,
              red, o, ox);
}

// Kinked toy fits, one block per toy at a time (fit_toys' loop, with fit_kinked).
extern "C" __global__ void __launch_bounds__(256, RUN_MIN_BLOCKS) fit_toys_kinked(Tables tb, FitArgs A) {
    extern __shared__ double smem[];
    __shared__ int s_toy;
    const int t = threadIdx.x;
    const int P = tb.n_params, M = tb.n_main;
    double* st = A.state + (long long)blockIdx.x * A.state_len;
    double* row = st + A.row_off;
    double* sc = A.scratch + (long long)blockIdx.x * A.scratch_len;
    __shared__ Tables s_tb;
    __shared__ FitArgs s_A;
    if (t == 0) {
        s_tb = tb;
        s_A = A;
    }
    for (;;) {
        __syncthreads();
        if (t == 0) s_toy = atomicAdd(A.next_toy, 1);
        __syncthreads();
        int k = s_toy;
        if (k >= A.count) return;
        if (t == 0)
            draw_toy(A.seed, A.toy_list ? A.toy_list[k] : A.first + (u64)k, M, tb.n_aux, A.lam_main, A.aux_kind,
                     A.aux_center, A.aux_sigma, row);
        __syncthreads();
        fit_kinked(s_tb, s_A, A.z_starts ? A.z_starts + (long long)k * P : A.z_init, row, st, sc, smem,
                   A.out + (long long)k * FIT_OUT, A.want_x ? A.out_x + (long long)k * P : nullptr);
    }
}
