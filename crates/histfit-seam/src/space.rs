//! The parameter space of a likelihood: what inference may know about its parameters and nothing
//! about how the likelihood is built. Names, starting point, bounds, which are fixed, the
//! parameter of interest, each parameter's constraint (kind, centre, width), the scale a fit
//! works in, the non-smooth points (kinks at 0) an optimizer has to treat with care, and which
//! parameters enter through one term only (what lets a Hessian step several at once).
//!
//! Every likelihood describes itself with one [`ParameterSpace`]; a binned HistFactory model
//! builds its own in `histfit_compute::histfactory::parameter_space`.

/// How a parameter is constrained by auxiliary data, with the constraint's centre (the observed
/// auxiliary value in the parameter's units) and width (its prior standard deviation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Prior {
    /// No constraint term: a free parameter (a normalisation, a POI).
    Free,
    /// A Gaussian constraint N(centre | θ, width).
    Gauss { centre: f64, width: f64 },
    /// A Poisson constraint on θ·τ, read as centre ± width (centre = aux/τ, width = 1/√τ).
    Poisson { centre: f64, width: f64 },
}

impl Prior {
    /// Centre and width of a constrained parameter; `None` for a free one.
    pub fn centre_width(&self) -> Option<(f64, f64)> {
        match *self {
            Prior::Free => None,
            Prior::Gauss { centre, width } | Prior::Poisson { centre, width } => {
                Some((centre, width))
            }
        }
    }
}

/// The parameters of one likelihood as inference sees them.
#[derive(Debug, Clone, PartialEq)]
pub struct ParameterSpace {
    pub names: Vec<String>,
    /// The suggested starting point.
    pub init: Vec<f64>,
    pub bounds: Vec<(f64, f64)>,
    /// Held at `init` by the likelihood's own definition.
    pub fixed: Vec<bool>,
    /// The parameter of interest, if the likelihood has one (fits and yields need none; tests,
    /// limits, scans and rankings do: [`poi`](Self::poi)).
    pub poi: Option<usize>,
    pub priors: Vec<Prior>,
    /// The natural step of each parameter (a constraint's width, else 1): fits work in θ/scale.
    pub scales: Vec<f64>,
    /// Parameters at which the likelihood has a kink at 0 (its first derivative jumps there).
    pub kinked: Vec<bool>,
    /// Where a parameter enters the likelihood through one term only, besides its own
    /// constraint: that term's label (for a binned model, the main bin). Two parameters with
    /// different labels have no mixed second derivative, so a Hessian may step them together
    /// and read each one's curvature from its own gradient component. `None`: no such promise
    /// (and what a wrapper that adds a term coupling parameters must set).
    pub local_term: Vec<Option<u32>>,
    /// `scales` are each free parameter's 1/√(∂²(−ln L)/∂θ²) at `init`, rounded to a power of
    /// two (event-level models): in these units the step −g is close to the Newton step, so
    /// fits take it whole at once, and a certified minimum (projected gradient ≤ 1e-3 per unit)
    /// is within ~1e-3 of each parameter's uncertainty of it where the parameters are not
    /// strongly correlated (a correlation ρ loosens that by √((1 + ρ)/(1 − ρ))): histfit-infer's
    /// fits make no further Newton round (on every event-level fixture, up to |ρ| = 0.99, they
    /// end below 3e-5 anyway).
    pub curvature_units: bool,
}

impl ParameterSpace {
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Refuses a space whose tables disagree in length or whose POI is not one of its
    /// parameters (a likelihood's own bug, caught before a fit indexes past an end).
    pub fn check(&self) -> crate::Result<()> {
        let n = self.names.len();
        for (what, len) in [
            ("parameter space: init", self.init.len()),
            ("parameter space: bounds", self.bounds.len()),
            ("parameter space: fixed", self.fixed.len()),
            ("parameter space: priors", self.priors.len()),
            ("parameter space: scales", self.scales.len()),
            ("parameter space: kinked", self.kinked.len()),
            ("parameter space: local_term", self.local_term.len()),
        ] {
            if len != n {
                return Err(crate::ComputeError::Length {
                    what,
                    expected: n,
                    got: len,
                });
            }
        }
        if let Some(p) = self.poi.filter(|&p| p >= n) {
            return Err(crate::ComputeError::InvalidData {
                place: "parameter space: poi".into(),
                rule: format!("index {p} is not one of its {n} parameters"),
            });
        }
        Ok(())
    }

    /// The parameter of interest, or an error saying that what was asked needs one.
    pub fn poi(&self) -> crate::Result<usize> {
        self.poi.ok_or_else(|| crate::ComputeError::InvalidData {
            place: "parameter of interest".into(),
            rule: "the model has none, and this needs one: choose it with --poi NAME (Python: poi=\"NAME\"; an HS3 document names its parameters of interest in an analysis)".into(),
        })
    }

    pub fn poi_name(&self) -> Option<&str> {
        self.poi.map(|i| self.names[i].as_str())
    }

    /// Index of the parameter with this name.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// A space without priors or kinks: every parameter at scale 1 (the shape of a plain
    /// parametric likelihood; a likelihood with constraints fills `priors` and `scales`).
    pub fn unconstrained(
        names: Vec<String>,
        init: Vec<f64>,
        bounds: Vec<(f64, f64)>,
        poi: usize,
    ) -> ParameterSpace {
        let n = names.len();
        ParameterSpace {
            names,
            init,
            bounds,
            fixed: vec![false; n],
            poi: Some(poi),
            priors: vec![Prior::Free; n],
            scales: vec![1.0; n],
            kinked: vec![false; n],
            local_term: vec![None; n],
            curvature_units: false,
        }
    }
}
