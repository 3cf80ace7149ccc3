//! Synthetic pyhf workspaces of a chosen size, for the scale measurements of input handling
//! (`histfit-infer`'s `scale` example): parse, compile and fit cost against channels, bins and
//! modifiers. The shape is an ordinary analysis: in each channel a signal (normfactor `mu`) over a
//! background with per-bin MC statistics (staterror, optional) and its share of the
//! systematics — normsys and histosys alternately, systematic k on the background of channel
//! k mod channels. Yields vary from bin to bin and the data are the background plus half the
//! signal (rounded), so the best fit is an ordinary interior minimum near μ = 0.5.

use std::fmt::Write;

/// The size of a synthetic workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub channels: usize,
    /// Bins of each channel.
    pub bins: usize,
    /// Systematics (normsys and histosys alternately), each its own parameter.
    pub modifiers: usize,
    /// A staterror on each channel's background (one γ per bin).
    pub staterror: bool,
}

impl Size {
    /// Free parameters of the model it makes: μ, the systematics and the γ of every bin.
    pub fn parameters(&self) -> usize {
        1 + self.modifiers
            + if self.staterror {
                self.channels * self.bins
            } else {
                0
            }
    }
}

fn signal(c: usize, b: usize) -> f64 {
    5.0 + ((c * 7 + b * 3) % 11) as f64
}

fn background(c: usize, b: usize) -> f64 {
    50.0 + 10.0 * ((c * 31 + b * 17) % 13) as f64
}

fn list(out: &mut String, values: impl Iterator<Item = f64>) {
    out.push('[');
    for (i, v) in values.enumerate() {
        if i > 0 {
            out.push(',');
        }
        write!(out, "{v}").expect("writing to a String");
    }
    out.push(']');
}

/// The workspace's JSON text (written directly: a 10⁶-bin workspace would need far more memory
/// as a `serde_json::Value`).
pub fn workspace_json(size: Size) -> String {
    let Size {
        channels,
        bins,
        modifiers,
        staterror,
    } = size;
    assert!(
        channels > 0 && bins > 0,
        "a workspace needs a channel and a bin"
    );
    let mut s = String::with_capacity(64 * channels * bins + 256 * modifiers + 1024);
    s.push_str("{\"channels\":[");
    for c in 0..channels {
        if c > 0 {
            s.push(',');
        }
        write!(s, "{{\"name\":\"ch{c:06}\",\"samples\":[").expect("writing to a String");
        s.push_str("{\"name\":\"signal\",\"data\":");
        list(&mut s, (0..bins).map(|b| signal(c, b)));
        s.push_str(",\"modifiers\":[{\"name\":\"mu\",\"type\":\"normfactor\",\"data\":null}]},");
        s.push_str("{\"name\":\"background\",\"data\":");
        list(&mut s, (0..bins).map(|b| background(c, b)));
        s.push_str(",\"modifiers\":[");
        let mut first = true;
        if staterror {
            write!(
                s,
                "{{\"name\":\"stat_ch{c:06}\",\"type\":\"staterror\",\"data\":"
            )
            .expect("writing to a String");
            list(&mut s, (0..bins).map(|b| 0.05 * background(c, b)));
            s.push('}');
            first = false;
        }
        for k in (c..modifiers).step_by(channels) {
            if !first {
                s.push(',');
            }
            first = false;
            if k % 2 == 0 {
                let e = 0.02 + 0.001 * (k % 17) as f64;
                write!(
                    s,
                    "{{\"name\":\"syst{k}\",\"type\":\"normsys\",\"data\":{{\"hi\":{},\"lo\":{}}}}}",
                    1.0 + e,
                    1.0 - 0.9 * e
                )
                .expect("writing to a String");
            } else {
                write!(
                    s,
                    "{{\"name\":\"syst{k}\",\"type\":\"histosys\",\"data\":{{\"hi_data\":"
                )
                .expect("writing to a String");
                let shift = |b: usize| 0.01 * (1 + (k + b) % 5) as f64;
                list(
                    &mut s,
                    (0..bins).map(|b| background(c, b) * (1.0 + shift(b))),
                );
                s.push_str(",\"lo_data\":");
                list(
                    &mut s,
                    (0..bins).map(|b| background(c, b) * (1.0 - shift(b))),
                );
                s.push_str("}}");
            }
        }
        s.push_str("]}]}");
    }
    s.push_str("],\"observations\":[");
    for c in 0..channels {
        if c > 0 {
            s.push(',');
        }
        write!(s, "{{\"name\":\"ch{c:06}\",\"data\":").expect("writing to a String");
        list(
            &mut s,
            (0..bins).map(|b| (background(c, b) + 0.5 * signal(c, b)).round()),
        );
        s.push('}');
    }
    s.push_str(
        "],\"measurements\":[{\"name\":\"meas\",\"config\":{\"poi\":\"mu\",\"parameters\":[]}}],\"version\":\"1.0.0\"}",
    );
    s
}
