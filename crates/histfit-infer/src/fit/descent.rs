//! One L-BFGS-B descent of a fit ([`DescentRequest`]: a start, bounds, the side each kinked
//! coordinate is kept to, restarts, a rule to give it up), made on the host step by step.
//!
//! Every descent of a fit is stated as a request (see [`super::search::Search::run`]), so an
//! evaluator that runs descents whole where its evaluations are (a GPU,
//! [`AsyncEvaluator::offers_descents`]) is handed the request itself, and one that does not gets
//! this: the reference the device's port is held to.

use super::kinks::TINY;
use crate::Result;
use histfit_optim::{Ask, Lbfgsb, Options};
use histfit_seam::{AsyncEvaluator, Dataset, Descent, DescentRequest, DescentSpace, Watch};

/// The optimizer's options of a descent.
pub(crate) fn options(space: &DescentSpace) -> Options {
    let s = &space.settings;
    Options {
        memory: s.memory,
        pgtol: s.pgtol,
        ftol: s.ftol,
        edm: s.edm,
        max_iterations: s.max_iterations,
        max_evaluations: s.max_evaluations,
        c1: s.c1,
        c2: s.c2,
        full_first_step: s.full_first_step,
    }
}

/// The evaluations of one descent: the parameters at z (held ones from the space, coordinates
/// exactly at 0 with a side moved onto it), and the gradient in z.
struct Point<'a, E: AsyncEvaluator + ?Sized> {
    eval: &'a mut E,
    data: &'a Dataset,
    space: &'a DescentSpace,
    side: &'a [f64],
    x: Vec<f64>,
    grad: Vec<f64>,
    evaluations: usize,
}

/// The free entries of `x` at the coordinates `z` (θ = z·scale), those exactly at 0 with a side
/// (±1) moved onto it at ±[`TINY`]: the slope of that side of its kink, not the mean of both
/// that the model gives at 0.
pub(crate) fn place(free: &[usize], scale: &[f64], side: &[f64], z: &[f64], x: &mut [f64]) {
    for (k, &i) in free.iter().enumerate() {
        x[i] = if side[k] != 0.0 && z[k] == 0.0 {
            side[k] * TINY
        } else {
            z[k] * scale[k]
        };
    }
}

impl<E: AsyncEvaluator + ?Sized> Point<'_, E> {
    async fn nll_grad(&mut self, z: &[f64], gz: &mut [f64]) -> Result<f64> {
        place(
            &self.space.free,
            &self.space.scale,
            self.side,
            z,
            &mut self.x,
        );
        self.evaluations += 1;
        let f = self
            .eval
            .nll_grad(&self.x, self.data, &mut self.grad)
            .await?;
        for (k, &i) in self.space.free.iter().enumerate() {
            gz[k] = self.grad[i] * self.space.scale[k];
        }
        Ok(f)
    }
}

/// One L-BFGS-B run from `z0`, given up as soon as `watch` says so (asked once per iteration,
/// when the iteration count moves on): the run, and whether it was given up.
async fn run<E: AsyncEvaluator + ?Sized>(
    pt: &mut Point<'_, E>,
    z0: &[f64],
    (lower, upper): (&[f64], &[f64]),
    watch: Option<&Watch>,
) -> Result<(Lbfgsb, bool)> {
    let opts = options(pt.space);
    let mut gz = vec![0.0; z0.len()];
    let mut opt = Lbfgsb::new(z0, lower, upper, opts).with_kinks(&pt.space.kinks);
    let (mut seen, mut held) = (0, 0);
    while let Ask::Evaluate(z) = opt.ask() {
        let z = z.to_vec();
        let f = pt.nll_grad(&z, &mut gz).await?;
        opt.tell(f, &gz);
        if opt.iterations > seen {
            seen = opt.iterations;
            if let Some(w) = watch {
                // At 0 the slope is the kept side's (`side`).
                let (x, g) = (opt.x()[w.k], opt.gradient()[w.k]);
                let pushed_back = (lower[w.k] == 0.0 && g > 0.0) || (upper[w.k] == 0.0 && g < 0.0);
                held = if x == 0.0 && pushed_back { held + 1 } else { 0 };
                let above = opt.f() - w.factor * opt.edm() > w.ceiling;
                if opt.iterations >= w.after && (above || held >= w.held) {
                    return Ok((opt, true));
                }
            }
        }
    }
    Ok((opt, false))
}

fn ended(opt: &Lbfgsb) -> Descent {
    Descent {
        z: opt.x().to_vec(),
        f: opt.f(),
        converged: opt.status().converged(),
        given_up: false,
        reason: opt.status().reason().to_owned(),
        iterations: 0,
        evaluations: 0,
        pinned: None,
    }
}

/// The descent `req` of `data`, evaluated by `eval` step by step.
pub(crate) async fn on_host<E: AsyncEvaluator + ?Sized>(
    eval: &mut E,
    data: &Dataset,
    req: &DescentRequest,
) -> Result<Descent> {
    if req.settle.is_some() || req.polish.is_some() {
        // The fit settles and polishes itself where the evaluator does not (`Search::settled`,
        // `Search::polish`).
        return Err(crate::InferError::Request(
            "a descent asked to be settled or polished was made on the host".into(),
        ));
    }
    let space = &*req.space;
    let n = eval.space().len();
    let mut pt = Point {
        eval,
        data,
        space,
        side: &req.side,
        x: space.held.clone(),
        grad: vec![0.0; n],
        evaluations: 0,
    };
    let bounds = (&req.lower[..], &req.upper[..]);
    let (mut opt, given_up) = run(&mut pt, &req.z0, bounds, req.watch.as_ref()).await?;
    let mut iterations = opt.iterations;
    if given_up {
        return Ok(Descent {
            converged: false,
            given_up: true,
            reason: "given up by its watch".into(),
            iterations,
            evaluations: pt.evaluations,
            ..ended(&opt)
        });
    }
    // Restarts with fresh curvature memory (unwatched) while they gain (see `Search::descend`).
    for _ in 0..req.passes {
        if !opt.status().converged() {
            break;
        }
        let (again, _) = run(&mut pt, opt.x(), bounds, None).await?;
        iterations += again.iterations;
        let gain = opt.f() - again.f();
        if again.status().converged() && again.f() <= opt.f() {
            opt = again;
        }
        if gain <= 1e-10 * opt.f().abs().max(1.0) {
            break;
        }
    }
    Ok(Descent {
        iterations,
        evaluations: pt.evaluations,
        ..ended(&opt)
    })
}
