//! The command table: one module per command, each holding its arguments, its one call into
//! inference and its output (table and JSON document). `main` parses and dispatches here.

pub mod devices;
pub mod distributions;
pub mod fit;
pub mod grid;
pub mod hypotest;
pub mod hypotest_toys;
pub mod inspect;
pub mod limit;
pub mod merge_toys;
pub mod patchset;
pub mod plot;
pub mod pulls;
pub mod ranking;
pub mod scan;
pub mod significance;
pub mod toys;
pub mod workspace_tools;
pub mod xml2json;
pub mod yields;

use anyhow::Result;
use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum Command {
    /// Maximum likelihood fit with uncertainties.
    Fit(fit::Args),
    /// Profile likelihood scan of the POI: 2ΔNLL and conditional fits per point.
    Scan(scan::Args),
    /// Asymptotic CLs hypothesis test at one POI value.
    Hypotest(hypotest::Args),
    /// Observed and expected upper limits on the POI (CLs = alpha).
    Limit(limit::Args),
    /// Discovery significance (q0): observed and expected p0 and Z.
    Significance(significance::Args),
    /// Rank nuisance parameters by their impact on the POI (parallel refits).
    Ranking(ranking::Args),
    /// Generate and fit a toy ensemble (parallel, reproducible from the seed).
    Toys(toys::Args),
    /// Toy-based CLs (signal+background and background-only ensembles).
    HypotestToys(hypotest_toys::Args),
    /// Pull study: toys fitted with uncertainties, each parameter's pulls (θ̂ − θ_gen)/σ̂ with
    /// their mean and width.
    Pulls(pulls::Args),
    /// Merge the --json outputs of sharded `toys` or `hypotest-toys` runs into one result.
    MergeToys(merge_toys::Args),
    /// List the devices histfit can use (the CPU and CUDA GPUs), or why there is no GPU.
    Devices(devices::Args),
    /// List channels, bins, samples, parameters by type and the POI.
    Inspect(inspect::Args),
    /// pyhf patchsets: list the patches, apply one (writing the workspace), verify the digest.
    Patchset(patchset::Args),
    /// Pre-fit or post-fit yields per channel, sample and bin, with uncertainties.
    Yields(yields::Args),
    /// Event-level models: the events histogrammed against the expected counts per bin, in
    /// total and per component, with pulls (what `plot distributions` draws).
    Distributions(distributions::Args),
    /// The workspace's SHA-256 digest, as pyhf computes it and patchsets record it.
    Digest(workspace_tools::DigestArgs),
    /// Combine two workspaces, joining channels, observations and measurements by name (pyhf
    /// combine).
    Combine(workspace_tools::CombineArgs),
    /// Sort channels, samples, modifiers, measurements and observations by name (pyhf sort).
    Sort(workspace_tools::SortArgs),
    /// Remove channels, samples, modifiers (by name or type) or measurements (pyhf prune).
    Prune(workspace_tools::PruneArgs),
    /// Rename channels, samples, modifiers or measurements (pyhf rename).
    Rename(workspace_tools::RenameArgs),
    /// Draw a plot (SVG or PNG) from the JSON document of the command that made its numbers.
    Plot(plot::Args),
    /// Import a HistFactory XML configuration and its ROOT histograms as a pyhf workspace (pyhf
    /// xml2json).
    Xml2json(xml2json::Args),
}

impl Command {
    pub fn run(self) -> Result<ExitCode> {
        match self {
            Command::Fit(a) => fit::run(a),
            Command::Scan(a) => scan::run(a),
            Command::Hypotest(a) => hypotest::run(a),
            Command::Limit(a) => limit::run(a),
            Command::Significance(a) => significance::run(a),
            Command::Ranking(a) => ranking::run(a),
            Command::Toys(a) => toys::run(a),
            Command::HypotestToys(a) => hypotest_toys::run(a),
            Command::Pulls(a) => pulls::run(a),
            Command::MergeToys(a) => merge_toys::run(a),
            Command::Devices(a) => devices::run(a),
            Command::Inspect(a) => inspect::run(a),
            Command::Patchset(a) => patchset::run(a),
            Command::Yields(a) => yields::run(a),
            Command::Distributions(a) => distributions::run(a),
            Command::Digest(a) => workspace_tools::digest(a),
            Command::Combine(a) => workspace_tools::combine(a),
            Command::Sort(a) => workspace_tools::sort(a),
            Command::Prune(a) => workspace_tools::prune(a),
            Command::Rename(a) => workspace_tools::rename(a),
            Command::Xml2json(a) => xml2json::run(a),
            Command::Plot(a) => plot::run(a),
        }
    }
}

/// `--json` and `-o FILE`, shared by the commands.
#[derive(clap::Args, Debug, Clone)]
pub struct OutputArgs {
    /// Machine-readable JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Write the output to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<String>,
}

impl OutputArgs {
    /// Writes the JSON document or the table, whichever was asked for.
    pub fn emit(
        &self,
        json: impl FnOnce() -> String,
        table: impl FnOnce() -> String,
    ) -> Result<()> {
        let text = if self.json { json() } else { table() };
        crate::output::emit(&text, self.output.as_deref())
    }
}

/// Parses LO:HI.
pub fn parse_range(s: &str) -> Result<(f64, f64)> {
    let bad = || anyhow::anyhow!("range \"{s}\": expected LO:HI with LO < HI, e.g. 0:3");
    let (a, b) = s.split_once(':').ok_or_else(bad)?;
    let (lo, hi): (f64, f64) = (
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    );
    if !(lo.is_finite() && hi.is_finite() && lo < hi) {
        return Err(bad());
    }
    Ok((lo, hi))
}

/// `--expected-at`: the POI value of a discovery test's expected figures (q0's alternative).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ExpectedAt {
    /// The POI value the discovery test's expected figures are computed at (q0's alternative:
    /// the expected significance's Asimov dataset, the toys' second ensemble). Default: 1 where
    /// the POI is a binned model's (a signal strength, as pyhf); an event-level POI (often a
    /// yield) its value in the document where positive, else 1
    #[arg(
        long = "expected-at",
        value_name = "VALUE",
        allow_negative_numbers = true
    )]
    pub expected_at: Option<f64>,
}

impl ExpectedAt {
    /// The value asked, else the likelihood's default (`None`: 1), its note said on stderr.
    pub fn resolve(&self, model: &crate::device::Likelihood) -> Option<f64> {
        if self.expected_at.is_some() {
            return self.expected_at;
        }
        let (value, note) = model.discovery_alternative();
        if let Some(n) = note {
            eprintln!("note: {n}");
        }
        value
    }
}

pub fn warn_all(warnings: &[String]) {
    for w in warnings {
        eprintln!("warning: {w}");
    }
}

/// The POI value a hypotest tests: `--mu` where given, else 1 — and 0 for q0, the test of
/// μ = 0 (a q0 test asked at another μ says so and tests 0, as pyhf does).
pub fn tested_mu(mu: Option<f64>, test_stat: histfit_infer::TestStat) -> f64 {
    match (mu, test_stat) {
        (Some(m), _) => m,
        (None, histfit_infer::TestStat::Q0) => 0.0,
        (None, _) => 1.0,
    }
}

/// Parses `--shard K/N` (1-based K) into a range of toy indices.
pub fn parse_shard(shard: Option<&str>, n_toys: u64) -> Result<std::ops::Range<u64>> {
    let Some(spec) = shard else {
        return Ok(0..n_toys);
    };
    let bad = || anyhow::anyhow!("--shard {spec}: expected K/N with 1 ≤ K ≤ N, e.g. 2/10");
    let (k, n) = spec.split_once('/').ok_or_else(bad)?;
    let (k, n): (u64, u64) = (
        k.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if k == 0 || k > n {
        return Err(bad());
    }
    Ok(histfit_infer::shard_range(n_toys, k - 1, n)?)
}
