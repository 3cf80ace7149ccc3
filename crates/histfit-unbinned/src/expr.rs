//! Expressions of HS3 `generic_dist` and `generic_function` — the TFormula subset ROOT writes:
//! numbers, names, `+ - * /`, `^` and `**` (right-associative, above unary minus as in
//! TFormula), parentheses, and the functions `exp`, `log`/`ln`, `log10`, `sqrt`, `abs`/`fabs`,
//! `erf`, `erfc`, `lgamma`/`LnGamma`, `sin`, `cos`, `tan`, `pow(a, b)`, `min`, `max` (with or without `TMath::` or
//! `std::`), the constants `pi` and `e` where no parameter has those names, and the comparisons
//! `< <= > >= == !=` and logic `&& || !` (1 or 0, a number not 0 being true, as in TFormula;
//! TTree selections use them) — parsed straight
//! into nodes of the [`Graph`], so an expression is differentiated and evaluated as the named
//! PDFs are.

use crate::graph::{Graph, Id};

/// Where an expression does not parse, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    /// Character position (0-based) in the expression.
    pub at: usize,
    pub message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at character {}: {}", self.at, self.message)
    }
}

/// Parses `text` into the graph; `resolve` gives the node of each name (a parameter, an
/// observable, another function) or says why it cannot.
pub fn parse(
    g: &mut Graph,
    text: &str,
    resolve: &mut dyn FnMut(&mut Graph, &str) -> Result<Id, String>,
) -> Result<Id, ParseError> {
    let chars: Vec<char> = text.chars().collect();
    let mut p = Parser {
        chars: &chars,
        at: 0,
        g,
        resolve,
        depth: 0,
    };
    let id = p.expr()?;
    p.skip_space();
    if p.at < chars.len() {
        return Err(p.error(format!("unexpected '{}'", chars[p.at])));
    }
    Ok(id)
}

/// How deeply parentheses and operators may nest: a bound on recursion for hostile input.
const MAX_DEPTH: usize = 200;

struct Parser<'a, 'g> {
    chars: &'a [char],
    at: usize,
    g: &'g mut Graph,
    resolve: &'a mut dyn FnMut(&mut Graph, &str) -> Result<Id, String>,
    depth: usize,
}

impl Parser<'_, '_> {
    fn error(&self, message: impl Into<String>) -> ParseError {
        ParseError {
            at: self.at,
            message: message.into(),
        }
    }

    fn skip_space(&mut self) {
        while self.at < self.chars.len() && self.chars[self.at].is_whitespace() {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_space();
        self.chars.get(self.at).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error("expression nested too deeply"));
        }
        Ok(())
    }

    /// Whether the next characters are `op` (two-character operators checked whole).
    fn at_op(&mut self, op: &str) -> bool {
        self.skip_space();
        let n = op.chars().count();
        self.chars
            .get(self.at..self.at + n)
            .is_some_and(|c| c.iter().copied().eq(op.chars()))
    }

    fn eat_op(&mut self, op: &str) -> bool {
        let here = self.at_op(op);
        if here {
            self.at += op.chars().count();
        }
        here
    }

    /// `a || b`, the loosest level: 1 where either is not 0, else 0 (TFormula's logic on
    /// numbers).
    fn expr(&mut self) -> Result<Id, ParseError> {
        self.enter()?;
        let mut acc = self.conjunction()?;
        while self.eat_op("||") {
            let b = self.conjunction()?;
            let (ta, tb) = (self.truth(acc), self.truth(b));
            let both = self.g.mul(ta, tb);
            let either = self.g.add(ta, tb);
            acc = self.g.sub(either, both);
        }
        self.depth -= 1;
        Ok(acc)
    }

    fn conjunction(&mut self) -> Result<Id, ParseError> {
        let mut acc = self.comparison()?;
        while self.eat_op("&&") {
            let b = self.comparison()?;
            let (ta, tb) = (self.truth(acc), self.truth(b));
            acc = self.g.mul(ta, tb);
        }
        Ok(acc)
    }

    /// `a == b`, `a != b` (looser than `<`, as in C): 1 where it holds, else 0.
    fn comparison(&mut self) -> Result<Id, ParseError> {
        let mut acc = self.relation()?;
        loop {
            let negate = if self.eat_op("==") {
                false
            } else if self.eat_op("!=") {
                true
            } else {
                return Ok(acc);
            };
            let b = self.relation()?;
            acc = self.equal(acc, b);
            if negate {
                let one = self.g.constant(1.0);
                acc = self.g.sub(one, acc);
            }
        }
    }

    /// `a OP b` for one of `<= >= < >`: 1 where it holds, else 0.
    fn relation(&mut self) -> Result<Id, ParseError> {
        let mut acc = self.sum()?;
        while let Some(op) = ["<=", ">=", "<", ">"].into_iter().find(|op| self.at_op(op)) {
            self.at += op.len();
            let b = self.sum()?;
            let (one, zero) = (self.g.constant(1.0), self.g.constant(0.0));
            // A comparison with NaN is false (0), as in C: `select_ge` takes its second branch
            // where the difference is NaN, so `<` and `>` check both orders.
            acc = match op {
                ">=" => self.g.select_ge(acc, b, one, zero),
                "<=" => self.g.select_ge(b, acc, one, zero),
                ">" => {
                    let not_below = self.g.select_ge(b, acc, zero, one);
                    self.g.select_ge(acc, b, not_below, zero)
                }
                _ => {
                    let not_above = self.g.select_ge(acc, b, zero, one);
                    self.g.select_ge(b, acc, not_above, zero)
                }
            };
        }
        Ok(acc)
    }

    fn equal(&mut self, a: Id, b: Id) -> Id {
        let (one, zero) = (self.g.constant(1.0), self.g.constant(0.0));
        let ge = self.g.select_ge(a, b, one, zero);
        self.g.select_ge(b, a, ge, zero)
    }

    /// 1 where `x` is not 0, else 0.
    fn truth(&mut self, x: Id) -> Id {
        let (one, zero) = (self.g.constant(1.0), self.g.constant(0.0));
        let is_zero = self.equal(x, zero);
        self.g.sub(one, is_zero)
    }

    fn sum(&mut self) -> Result<Id, ParseError> {
        self.enter()?;
        let mut acc = self.term()?;
        loop {
            if self.eat('+') {
                let t = self.term()?;
                acc = self.g.add(acc, t);
            } else if self.peek() == Some('-') {
                self.at += 1;
                let t = self.term()?;
                acc = self.g.sub(acc, t);
            } else {
                break;
            }
        }
        self.depth -= 1;
        Ok(acc)
    }

    fn term(&mut self) -> Result<Id, ParseError> {
        let mut acc = self.unary()?;
        loop {
            self.skip_space();
            let two_stars =
                self.chars.get(self.at) == Some(&'*') && self.chars.get(self.at + 1) == Some(&'*');
            if !two_stars && self.eat('*') {
                let t = self.unary()?;
                acc = self.g.mul(acc, t);
            } else if self.eat('/') {
                let t = self.unary()?;
                acc = self.g.div(acc, t);
            } else {
                break;
            }
        }
        Ok(acc)
    }

    fn unary(&mut self) -> Result<Id, ParseError> {
        self.enter()?;
        let r = if self.eat('-') {
            let u = self.unary()?;
            Ok(self.g.neg(u))
        } else if !self.at_op("!=") && self.eat('!') {
            let u = self.unary()?;
            let t = self.truth(u);
            let one = self.g.constant(1.0);
            Ok(self.g.sub(one, t))
        } else if self.eat('+') {
            self.unary()
        } else {
            self.power()
        };
        self.depth -= 1;
        r
    }

    fn power(&mut self) -> Result<Id, ParseError> {
        let base = self.atom()?;
        self.skip_space();
        let caret = self.eat('^');
        let stars = !caret
            && self.chars.get(self.at) == Some(&'*')
            && self.chars.get(self.at + 1) == Some(&'*');
        if stars {
            self.at += 2;
        }
        if caret || stars {
            let exponent = self.unary()?;
            return Ok(self.g.pow(base, exponent));
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<Id, ParseError> {
        match self.peek() {
            None => Err(self.error("expression ends where a value was expected")),
            Some('(') => {
                self.at += 1;
                let e = self.expr()?;
                if !self.eat(')') {
                    return Err(self.error("expected ')'"));
                }
                Ok(e)
            }
            Some(c) if c.is_ascii_digit() || c == '.' => self.number(),
            Some(c) if c.is_alphabetic() || c == '_' || c == '@' => self.name(),
            Some(c) => Err(self.error(format!("unexpected '{c}'"))),
        }
    }

    fn number(&mut self) -> Result<Id, ParseError> {
        let start = self.at;
        let digits = |p: &mut Self| {
            while p.at < p.chars.len() && p.chars[p.at].is_ascii_digit() {
                p.at += 1;
            }
        };
        digits(self);
        if self.chars.get(self.at) == Some(&'.') {
            self.at += 1;
            digits(self);
        }
        if matches!(self.chars.get(self.at), Some('e') | Some('E')) {
            let save = self.at;
            self.at += 1;
            if matches!(self.chars.get(self.at), Some('+') | Some('-')) {
                self.at += 1;
            }
            let exp_start = self.at;
            digits(self);
            if self.at == exp_start {
                self.at = save;
            }
        }
        let text: String = self.chars[start..self.at].iter().collect();
        let v: f64 = text.parse().map_err(|_| ParseError {
            at: start,
            message: format!("\"{text}\" is not a number"),
        })?;
        Ok(self.g.constant(v))
    }

    fn name(&mut self) -> Result<Id, ParseError> {
        let start = self.at;
        while self.at < self.chars.len() {
            let c = self.chars[self.at];
            let scope = c == ':' && self.chars.get(self.at + 1) == Some(&':');
            if c.is_alphanumeric() || c == '_' || c == '@' || c == '.' {
                self.at += 1;
            } else if scope {
                self.at += 2;
            } else {
                break;
            }
        }
        // `x[0]`: a name with an index, as TFormula's variables are written.
        if self.chars.get(self.at) == Some(&'[') {
            while self.at < self.chars.len() && self.chars[self.at] != ']' {
                self.at += 1;
            }
            if self.at == self.chars.len() {
                return Err(self.error("expected ']'"));
            }
            self.at += 1;
        }
        let full: String = self.chars[start..self.at].iter().collect();
        let name = full
            .trim_start_matches("TMath::")
            .trim_start_matches("std::")
            .to_string();
        if self.peek() == Some('(') {
            self.at += 1;
            return self.call(&name, start);
        }
        // (`pi` and `e` are the resolver's to give: a document may define them as parameters.)
        (self.resolve)(self.g, &full).map_err(|why| ParseError {
            at: start,
            message: why,
        })
    }

    fn call(&mut self, name: &str, start: usize) -> Result<Id, ParseError> {
        let mut args = Vec::new();
        if !self.eat(')') {
            loop {
                args.push(self.expr()?);
                if self.eat(')') {
                    break;
                }
                if !self.eat(',') {
                    return Err(self.error("expected ',' or ')'"));
                }
            }
        }
        let want = |n: usize| -> Result<(), ParseError> {
            if args.len() == n {
                Ok(())
            } else {
                Err(ParseError {
                    at: start,
                    message: format!("{name}() takes {n} argument(s), got {}", args.len()),
                })
            }
        };
        let g = &mut *self.g;
        let one = |g: &mut Graph| g.constant(1.0);
        Ok(match name.to_ascii_lowercase().as_str() {
            "exp" => {
                want(1)?;
                g.exp(args[0])
            }
            "log" | "ln" => {
                want(1)?;
                g.log(args[0])
            }
            "log10" => {
                want(1)?;
                let l = g.log(args[0]);
                g.scale(l, 1.0 / std::f64::consts::LN_10)
            }
            "sqrt" => {
                want(1)?;
                g.sqrt(args[0])
            }
            "abs" | "fabs" => {
                want(1)?;
                g.abs(args[0])
            }
            "erf" => {
                want(1)?;
                g.erf(args[0])
            }
            "erfc" => {
                want(1)?;
                let e = g.erf(args[0]);
                let o = one(g);
                g.sub(o, e)
            }
            "lgamma" | "lngamma" => {
                want(1)?;
                g.lgamma(args[0])
            }
            "sin" => {
                want(1)?;
                g.sin(args[0])
            }
            "cos" => {
                want(1)?;
                g.cos(args[0])
            }
            "tan" => {
                want(1)?;
                let (s, c) = (g.sin(args[0]), g.cos(args[0]));
                g.div(s, c)
            }
            "pow" | "power" => {
                want(2)?;
                g.pow(args[0], args[1])
            }
            "pi" => {
                want(0)?;
                g.constant(std::f64::consts::PI)
            }
            "sq" => {
                want(1)?;
                g.powi(args[0], 2)
            }
            "min" => {
                want(2)?;
                g.min(args[0], args[1])
            }
            "max" => {
                want(2)?;
                g.max(args[0], args[1])
            }
            _ => {
                return Err(ParseError {
                    at: start,
                    message: format!("unknown function \"{name}\""),
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str, params: &[f64]) -> Result<f64, ParseError> {
        let mut g = Graph::new();
        let names = ["a", "b", "x"];
        // As the HS3 reader resolves names: parameters, then π and e where none is named so.
        let id = parse(
            &mut g,
            text,
            &mut |g, n| match names.iter().position(|m| *m == n) {
                Some(i) => Ok(g.param(i)),
                None if n == "pi" => Ok(g.constant(std::f64::consts::PI)),
                None if n == "e" => Ok(g.constant(std::f64::consts::E)),
                None => Err(format!("\"{n}\" is not defined")),
            },
        )?;
        Ok(g.value(id, params, &[]))
    }

    #[test]
    fn precedence_and_functions() {
        let p = [2.0, 3.0, 0.5];
        let close = |t: &str, v: f64| {
            let got = value(t, &p).unwrap();
            assert!(
                (got - v).abs() < 1e-14 * v.abs().max(1.0),
                "{t}: {got} vs {v}"
            );
        };
        close("a + b * x", 3.5);
        close("-a^2", -4.0);
        close("a^b^x", 2f64.powf(3f64.sqrt()));
        close("a**2 * b", 12.0);
        close("TMath::Exp(-a*x)*(1+b*x*x)", (-1.0f64).exp() * 1.75);
        close(
            "pow(a, 3) - sqrt(b) / log(a)",
            8.0 - 3f64.sqrt() / 2f64.ln(),
        );
        close(
            "1.5e-1 * abs(-a) + erf(x) - pi",
            0.3 + libm::erf(0.5) - std::f64::consts::PI,
        );
        close("(a)/(b)", 2.0 / 3.0);
        close("TMath::LnGamma(b + 2) - lgamma(a)", 24f64.ln());
    }

    /// Comparisons and logic give 1 or 0 and bind looser than arithmetic: `||` loosest, then
    /// `&&`, then the comparisons; a number not 0 is true.
    #[test]
    fn comparisons_and_logic() {
        let p = [2.0, 3.0, 0.5];
        for (t, v) in [
            ("a < b", 1.0),
            ("a > b", 0.0),
            ("a <= 2", 1.0),
            ("a >= 2.5", 0.0),
            ("a == 2", 1.0),
            ("a != 2", 0.0),
            ("a + 1 == b", 1.0),
            ("a < b && x > 1", 0.0),
            ("a < b || x > 1", 1.0),
            ("x > 1 || a > b && b > a", 0.0),
            ("!(a > b)", 1.0),
            ("!x", 0.0),
            ("a && 0", 0.0),
            ("(a < b) * 5 + (a > b)", 5.0),
            ("a < b == 1", 1.0),
        ] {
            assert_eq!(value(t, &p).unwrap(), v, "{t}");
        }
        // NaN compares false (and is true as a number: not 0), as in C.
        let q = [f64::NAN, 3.0, 0.5];
        for (t, v) in [
            ("a < b", 0.0),
            ("a > b", 0.0),
            ("a <= b", 0.0),
            ("a >= b", 0.0),
            ("a == a", 0.0),
            ("a != b", 1.0),
            ("!(a > b)", 1.0),
            ("a && x", 1.0),
        ] {
            assert_eq!(value(t, &q).unwrap(), v, "{t} with a = NaN");
        }
        assert!(value("a < ", &p).is_err());
        assert!(value("a = b", &p).is_err());
    }

    #[test]
    fn errors_name_the_position() {
        let e = value("a + * b", &[1.0, 1.0, 1.0]).unwrap_err();
        assert_eq!(e.at, 4);
        let e = value("a + c", &[1.0, 1.0, 1.0]).unwrap_err();
        assert!(e.at == 4 && e.message.contains("\"c\""), "{e}");
        assert!(value("exp(a", &[0.0; 3]).is_err());
        assert!(value("foo(a)", &[0.0; 3])
            .unwrap_err()
            .message
            .contains("foo"));
        assert!(value(&"(".repeat(10_000), &[0.0; 3]).is_err());
    }
}
