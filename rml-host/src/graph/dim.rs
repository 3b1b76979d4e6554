//! Symbolic dimensions: a [`Dim`] is a fixed size, a product of symbols (`N`,
//! `N*S`, `2*N`), or unknown until the graph is bound.
//!
//! The algebra is deliberately tiny: a symbolic dim is a *monomial*, a positive
//! integer coefficient times a product of symbols with exponents. Products of
//! monomials are monomials; a quotient is kept only when it is exact (`N*S*64 / 64`
//! is `N*S`, `6*N / 4` is not a monomial), and a sum only when the terms are alike
//! (`N + N` is `2*N`). Anything else becomes [`Dim::Unknown`], which shape inference
//! carries forward and [`crate::graph::Graph::bind`] resolves with concrete sizes.

use std::collections::BTreeMap;
use std::fmt;

/// One axis size of a value's shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A size known at load time.
    Fixed(usize),
    /// A product of symbols bound at run time (never a bare number: that is `Fixed`).
    Sym(Monomial),
    /// A size that depends on symbols in a way the algebra does not track (for
    /// example a convolution over a symbolic height); known after binding.
    Unknown,
}

/// `coeff * Π symbol^exponent`, with symbols sorted by name and at least one symbol.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Monomial {
    coeff: usize,
    factors: BTreeMap<String, u32>,
}

/// Symbol values chosen at bind time.
pub type Bindings = BTreeMap<String, usize>;

impl Dim {
    /// The plain symbol `name` (for example the batch size `N`).
    pub fn symbol(name: &str) -> Dim {
        Dim::Sym(Monomial {
            coeff: 1,
            factors: BTreeMap::from([(name.to_string(), 1)]),
        })
    }

    /// The fixed size, if known at load time.
    pub fn fixed(&self) -> Option<usize> {
        match self {
            Dim::Fixed(n) => Some(*n),
            _ => None,
        }
    }

    /// The symbol's name when this dim is one plain symbol (`N`, not `2*N`).
    pub fn as_symbol(&self) -> Option<&str> {
        match self {
            Dim::Sym(m) if m.coeff == 1 && m.factors.len() == 1 => m
                .factors
                .iter()
                .next()
                .filter(|(_, e)| **e == 1)
                .map(|(s, _)| s.as_str()),
            _ => None,
        }
    }

    /// The symbols this dim mentions.
    pub fn symbols(&self) -> impl Iterator<Item = &str> {
        let factors = match self {
            Dim::Sym(m) => Some(m.factors.keys()),
            _ => None,
        };
        factors.into_iter().flatten().map(String::as_str)
    }

    /// Parses a dim written in a file: a non-negative integer, or a product of
    /// factors (integers and symbols such as `N`, `seq_len`) joined by `*`.
    /// `?` reads as [`Dim::Unknown`] when `allow_unknown` is set.
    pub fn parse(value: &serde_json::Value, allow_unknown: bool) -> Result<Dim, String> {
        match value {
            serde_json::Value::Number(n) => n
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .map(Dim::Fixed)
                .ok_or_else(|| format!("dim {n} is not a non-negative integer")),
            serde_json::Value::String(s) if s == "?" && allow_unknown => Ok(Dim::Unknown),
            serde_json::Value::String(s) => s
                .split('*')
                .map(|factor| parse_factor(factor.trim()))
                .try_fold(Dim::Fixed(1), |acc, factor| Ok(acc.mul(&factor?))),
            other => Err(format!(
                "dim {other} is neither a non-negative integer nor a symbol"
            )),
        }
    }

    /// The product of two dims.
    pub fn mul(&self, other: &Dim) -> Dim {
        match (self, other) {
            (Dim::Fixed(0), _) | (_, Dim::Fixed(0)) => Dim::Fixed(0),
            (Dim::Unknown, _) | (_, Dim::Unknown) => Dim::Unknown,
            (a, b) => {
                let (a, b) = (a.monomial(), b.monomial());
                let Some(coeff) = a.coeff.checked_mul(b.coeff) else {
                    return Dim::Unknown;
                };
                let mut factors = a.factors;
                for (s, e) in b.factors {
                    *factors.entry(s).or_insert(0) += e;
                }
                Dim::from_monomial(Monomial { coeff, factors })
            }
        }
    }

    /// The product of many dims (1 for none).
    pub fn product<'a>(dims: impl IntoIterator<Item = &'a Dim>) -> Dim {
        dims.into_iter().fold(Dim::Fixed(1), |acc, d| acc.mul(d))
    }

    /// `self / divisor` when the quotient is again a dim (a monomial), else `None`.
    pub fn div_exact(&self, divisor: &Dim) -> Option<Dim> {
        match (self, divisor) {
            (_, Dim::Fixed(0)) | (Dim::Unknown, _) | (_, Dim::Unknown) => None,
            (Dim::Fixed(0), _) => Some(Dim::Fixed(0)),
            (a, b) => {
                let (a, b) = (a.monomial(), b.monomial());
                if !a.coeff.is_multiple_of(b.coeff) {
                    return None;
                }
                let mut factors = a.factors;
                for (s, e) in b.factors {
                    let have = factors.get_mut(&s).filter(|have| **have >= e)?;
                    *have -= e;
                    if *have == 0 {
                        factors.remove(&s);
                    }
                }
                Some(Dim::from_monomial(Monomial {
                    coeff: a.coeff / b.coeff,
                    factors,
                }))
            }
        }
    }

    /// The symbols of this dim without its coefficient (`N*S` for `6*N*S`; 1 for a
    /// fixed size; unknown stays unknown).
    pub fn symbolic_part(&self) -> Dim {
        match self {
            Dim::Sym(m) => Dim::Sym(Monomial {
                coeff: 1,
                factors: m.factors.clone(),
            }),
            Dim::Fixed(_) => Dim::Fixed(1),
            Dim::Unknown => Dim::Unknown,
        }
    }

    /// The sum of two dims when it is again a dim (fixed sizes, or alike monomials
    /// such as `N + 2*N`), else [`Dim::Unknown`].
    pub fn add(&self, other: &Dim) -> Dim {
        match (self, other) {
            (Dim::Fixed(a), Dim::Fixed(b)) => a.checked_add(*b).map_or(Dim::Unknown, Dim::Fixed),
            (Dim::Fixed(0), d) | (d, Dim::Fixed(0)) => d.clone(),
            (Dim::Sym(a), Dim::Sym(b)) if a.factors == b.factors => {
                a.coeff.checked_add(b.coeff).map_or(Dim::Unknown, |coeff| {
                    Dim::Sym(Monomial {
                        coeff,
                        factors: a.factors.clone(),
                    })
                })
            }
            _ => Dim::Unknown,
        }
    }

    /// The concrete size under `bindings`, or `None` for [`Dim::Unknown`], an unbound
    /// symbol or an overflow.
    pub fn eval(&self, bindings: &Bindings) -> Option<usize> {
        match self {
            Dim::Fixed(n) => Some(*n),
            Dim::Unknown => None,
            Dim::Sym(m) => m.factors.iter().try_fold(m.coeff, |acc, (s, e)| {
                let value = *bindings.get(s)?;
                (0..*e).try_fold(acc, |acc, _| acc.checked_mul(value))
            }),
        }
    }

    /// This dim as a monomial (a fixed size is a monomial without symbols).
    fn monomial(&self) -> Monomial {
        match self {
            Dim::Fixed(n) => Monomial {
                coeff: *n,
                factors: BTreeMap::new(),
            },
            Dim::Sym(m) => m.clone(),
            Dim::Unknown => Monomial {
                coeff: 0,
                factors: BTreeMap::new(),
            },
        }
    }

    /// The canonical dim for a monomial: fixed when no symbols remain.
    fn from_monomial(m: Monomial) -> Dim {
        if m.factors.is_empty() {
            Dim::Fixed(m.coeff)
        } else {
            Dim::Sym(m)
        }
    }
}

/// One factor of a dim string: an integer or a symbol name.
fn parse_factor(factor: &str) -> Result<Dim, String> {
    if let Ok(n) = factor.parse::<usize>() {
        return Ok(Dim::Fixed(n));
    }
    let mut chars = factor.chars();
    let starts_well = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if starts_well && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(Dim::symbol(factor))
    } else {
        Err(format!(
            "dim factor {factor:?} is neither a non-negative integer nor a symbol \
             (letters, digits and _, not starting with a digit)"
        ))
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Unknown => f.write_str("?"),
            Dim::Sym(m) => {
                let mut parts = Vec::new();
                if m.coeff != 1 {
                    parts.push(m.coeff.to_string());
                }
                for (s, e) in &m.factors {
                    parts.extend(std::iter::repeat_n(s.clone(), *e as usize));
                }
                f.write_str(&parts.join("*"))
            }
        }
    }
}

/// A shape of dims shown as `[N, 3, 32, 32]`.
pub fn show_dims(dims: &[Dim]) -> String {
    format!("[{}]", super::error::join(dims))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Dim {
        Dim::parse(&serde_json::Value::String(s.into()), true).unwrap()
    }

    #[test]
    fn products_and_exact_quotients_stay_symbolic() {
        let ns = d("N").mul(&d("S")).mul(&Dim::Fixed(64));
        assert_eq!(ns.to_string(), "64*N*S");
        assert_eq!(ns.div_exact(&Dim::Fixed(64)), Some(d("N*S")));
        assert_eq!(ns.div_exact(&d("4*S")), Some(d("16*N")));
        assert_eq!(d("6*N").div_exact(&Dim::Fixed(4)), None);
        assert_eq!(d("N").div_exact(&d("S")), None);
        assert_eq!(d("N").add(&d("2*N")), d("3*N"));
        assert_eq!(d("N").add(&d("S")), Dim::Unknown);
        assert_eq!(d("2*3"), Dim::Fixed(6));
    }

    #[test]
    fn evaluation_uses_bindings() {
        let b = Bindings::from([("N".to_string(), 3), ("S".to_string(), 5)]);
        assert_eq!(d("2*N*S").eval(&b), Some(30));
        assert_eq!(d("N*N").eval(&b), Some(9));
        assert_eq!(d("T").eval(&b), None);
        assert_eq!(Dim::Unknown.eval(&b), None);
    }

    #[test]
    fn bad_dims_are_rejected() {
        assert!(Dim::parse(&serde_json::json!(-1), false).is_err());
        assert!(Dim::parse(&serde_json::json!("1N"), false).is_err());
        assert!(Dim::parse(&serde_json::json!("?"), false).is_err());
        assert!(Dim::parse(&serde_json::json!(1.5), false).is_err());
    }
}
