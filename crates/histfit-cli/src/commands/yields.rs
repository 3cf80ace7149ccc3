//! `histfit yields`: pre-fit or post-fit yields per channel, sample and bin, with uncertainties
//! propagated through the full covariance (pre-fit: the constraints' widths; post-fit: the fit's
//! covariance), the channel totals with the correlations between samples, and the data.

use super::OutputArgs;
use crate::model_args::{FitArgs, ModelArgs};
use crate::output;
use anyhow::Result;
use histfit_compute::histfactory::{yields, ChannelYields};
use histfit_compute::CpuEvaluator;
use serde_json::json;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    fit: FitArgs,
    /// Post-fit yields (at the fit, with its covariance) instead of pre-fit ones.
    #[arg(long)]
    postfit: bool,
    /// The table's form: text (aligned columns), md (Markdown) or tex (LaTeX, booktabs); one
    /// table per channel, a row per sample, the total and the data, a column per bin.
    #[arg(long, default_value = "text", value_parser = ["text", "md", "tex"])]
    format: String,
    #[command(flatten)]
    out: OutputArgs,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let (model, source, data, mut eval, base) = a.model.prepare_fit(&a.fit)?;
    if let crate::device::Likelihood::Events(_) = &model {
        model.binned("yields")?;
    }
    let e = histfit_infer::parameter_estimate(&mut eval, &data, &base, a.postfit)?;
    if let Some(r) = e.fit.as_ref().filter(|r| !r.converged) {
        eprintln!("warning: the fit did not converge: {}", r.reason);
    }
    // A mixed likelihood's table is of its binned channels, at the whole likelihood's fit.
    let (binned, params, covariance) = model.binned_view("yields", &e.params, &e.covariance)?;
    let main = data.to_vec()[..binned.n_main].to_vec();
    let table = yields(
        &mut CpuEvaluator::new(binned.clone()),
        &params,
        &covariance,
        &main,
    )?;
    a.out.emit(
        || {
            output::json(
                &source,
                &model,
                &json!({"kind": "yields", "postfit": a.postfit, "channels": table}),
            )
        },
        || match a.format.as_str() {
            "md" => markdown(&table, a.postfit),
            "tex" => latex(&table, a.postfit),
            _ => text(&table, a.postfit),
        },
    )?;
    Ok(ExitCode::SUCCESS)
}

fn text(channels: &[ChannelYields], postfit: bool) -> String {
    let mut s = format!(
        "{} yields (± propagated through the {} covariance)\n",
        if postfit { "post-fit" } else { "pre-fit" },
        if postfit { "fit's" } else { "constraints'" }
    );
    for c in channels {
        let width = c
            .samples
            .iter()
            .map(|x| x.name.len())
            .max()
            .unwrap_or(5)
            .max(5);
        s.push_str(&format!("\nchannel {}\n", c.name));
        let cell =
            |y: f64, u: f64| format!("{:>12} ± {:<10}", format!("{y:.4}"), format!("{u:.4}"));
        for x in c.samples.iter().chain(std::iter::once(&c.total)) {
            s.push_str(&format!("  {:<width$}", x.name));
            for (y, u) in x.yields.iter().zip(&x.uncertainties) {
                s.push_str(&cell(*y, *u));
            }
            s.push('\n');
        }
        s.push_str(&format!("  {:<width$}", "data"));
        for d in &c.data {
            s.push_str(&format!("{:>12}   {:<10}", d, ""));
        }
        s.push('\n');
    }
    s
}

/// The rows of a channel's table: each sample and the total as "yield ± σ", then the data.
fn rows(c: &ChannelYields, pm: &str) -> Vec<(String, Vec<String>)> {
    let mut rows: Vec<(String, Vec<String>)> = c
        .samples
        .iter()
        .chain(std::iter::once(&c.total))
        .map(|x| {
            let cells = x
                .yields
                .iter()
                .zip(&x.uncertainties)
                .map(|(y, u)| format!("{y:.2}{pm}{u:.2}"))
                .collect();
            (x.name.clone(), cells)
        })
        .collect();
    rows.push((
        "data".into(),
        c.data.iter().map(|d| format!("{d}")).collect(),
    ));
    rows
}

/// One Markdown table per channel.
fn markdown(channels: &[ChannelYields], postfit: bool) -> String {
    let mut s = format!(
        "{} yields (± propagated through the {} covariance)\n",
        if postfit { "Post-fit" } else { "Pre-fit" },
        if postfit { "fit's" } else { "constraints'" }
    );
    for c in channels {
        s.push_str(&format!("\n**{}**\n\n| sample |", c.name));
        for b in 0..c.data.len() {
            s.push_str(&format!(" bin {b} |"));
        }
        s.push_str("\n|---|");
        s.push_str(&"---:|".repeat(c.data.len()));
        s.push('\n');
        for (name, cells) in rows(c, " ± ") {
            s.push_str(&format!(
                "| {} | {} |\n",
                name.replace('|', "\\|"),
                cells.join(" | ")
            ));
        }
    }
    s
}

/// One LaTeX table per channel (booktabs rules; names with TeX's special characters escaped).
fn latex(channels: &[ChannelYields], postfit: bool) -> String {
    let escape = |t: &str| {
        t.chars()
            .map(|ch| match ch {
                '_' | '%' | '&' | '#' | '$' | '{' | '}' => format!("\\{ch}"),
                '~' => "\\textasciitilde{}".into(),
                '^' => "\\textasciicircum{}".into(),
                '\\' => "\\textbackslash{}".into(),
                c => c.to_string(),
            })
            .collect::<String>()
    };
    let mut s = format!(
        "% {} yields (± propagated through the {} covariance); needs \\usepackage{{booktabs}}\n",
        if postfit { "post-fit" } else { "pre-fit" },
        if postfit { "fit's" } else { "constraints'" }
    );
    for c in channels {
        let n = c.data.len();
        s.push_str(&format!(
            "\\begin{{table}}[htbp]\n\\centering\n\\caption{{{}}}\n\\begin{{tabular}}{{l{}}}\n\\toprule\n",
            escape(&c.name),
            "r".repeat(n)
        ));
        s.push_str("Sample");
        for b in 0..n {
            s.push_str(&format!(" & bin {b}"));
        }
        s.push_str(" \\\\\n\\midrule\n");
        let rows = rows(c, " $\\pm$ ");
        // The total (the row before the data) set off from the samples by a rule.
        let total = rows.len() - 2;
        for (k, (name, cells)) in rows.into_iter().enumerate() {
            if k == total {
                s.push_str("\\midrule\n");
            }
            s.push_str(&format!("{} & {} \\\\\n", escape(&name), cells.join(" & ")));
        }
        s.push_str("\\bottomrule\n\\end{tabular}\n\\end{table}\n");
    }
    s
}
