//! vmin/vmax range analysis of integer and bool values: drives div/mod folding and bound proofs.

use super::ops::Ops;
use super::uop::{Arg, UOp};

/// Sound lower and upper bound of `u`'s value. Falls back to the dtype's full range whenever an
/// op could wrap, so every bound returned holds for the real (wrapping) semantics.
pub fn derive_bounds(u: &UOp) -> (i128, i128) {
    let full = u.dtype().int_range();
    if u.dtype().is_float() || u.dtype().is_ptr() {
        return full;
    }
    let s = |i: usize| u.src()[i].bounds();
    let fit = |(lo, hi): (i128, i128)| if lo >= full.0 && hi <= full.1 { (lo, hi) } else { full };
    let corners = |a: (i128, i128), b: (i128, i128), f: fn(i128, i128) -> Option<i128>| {
        let c = [f(a.0, b.0), f(a.0, b.1), f(a.1, b.0), f(a.1, b.1)];
        if c.iter().any(Option::is_none) {
            return full;
        }
        let c = c.map(Option::unwrap);
        fit((*c.iter().min().unwrap(), *c.iter().max().unwrap()))
    };
    match u.op() {
        Ops::Const => match u.arg() {
            Arg::Const(c) => {
                let v = if u.dtype().is_unsigned() && u.dtype().bits() == 64 {
                    c.as_i64() as u64 as i128
                } else {
                    c.as_i64() as i128
                };
                (v, v)
            }
            _ => full,
        },
        Ops::DefineVar => match u.arg() {
            Arg::Var(_, lo, hi) => (*lo as i128, *hi as i128),
            _ => full,
        },
        Ops::Bind => s(0),
        Ops::Range | Ops::Special => (0, (u.src()[0].vmax() - 1).max(0)),
        Ops::Add => corners(s(0), s(1), i128::checked_add),
        Ops::Sub => corners(s(0), s(1), i128::checked_sub),
        Ops::Mul => corners(s(0), s(1), i128::checked_mul),
        Ops::Neg if !u.dtype().is_bool() => fit((-s(0).1, -s(0).0)),
        Ops::Max => (s(0).0.max(s(1).0), s(0).1.max(s(1).1)),
        Ops::IDiv if s(1).0 > 0 => corners(s(0), s(1), |a, b| a.checked_div(b)),
        Ops::Mod if s(1).0 > 0 => {
            let (lo, hi) = s(0);
            let m = s(1).1 - 1;
            if lo >= 0 && hi <= m && s(1).0 == s(1).1 {
                (lo, hi)
            } else if lo >= 0 {
                (0, m.min(hi))
            } else {
                (-m, m)
            }
        }
        Ops::CmpLt => decide(s(0).1 < s(1).0, s(0).0 >= s(1).1),
        Ops::CmpNe => {
            decide(s(0).1 < s(1).0 || s(0).0 > s(1).1, s(0).0 == s(0).1 && s(1).0 == s(1).1 && s(0).0 == s(1).0)
        }
        Ops::CmpEq => {
            decide(s(0).0 == s(0).1 && s(1).0 == s(1).1 && s(0).0 == s(1).0, s(0).1 < s(1).0 || s(0).0 > s(1).1)
        }
        Ops::And if u.dtype().is_bool() => (s(0).0.min(s(1).0), s(0).1.min(s(1).1)),
        Ops::Or if u.dtype().is_bool() => (s(0).0.max(s(1).0), s(0).1.max(s(1).1)),
        Ops::And if s(0).0 >= 0 && s(1).0 >= 0 => (0, s(0).1.min(s(1).1)),
        Ops::Where => match s(0) {
            (1, 1) => s(1),
            (0, 0) => s(2),
            _ => (s(1).0.min(s(2).0), s(1).1.max(s(2).1)),
        },
        Ops::Cast if !u.src()[0].dtype().is_float() => fit(s(0)),
        _ => full,
    }
}

/// Bounds of a bool that is known true, known false, or either.
fn decide(always: bool, never: bool) -> (i128, i128) {
    match (always, never) {
        (true, _) => (1, 1),
        (_, true) => (0, 0),
        _ => (0, 1),
    }
}
