//! ANSI colors for DEBUG output, which goes to stderr: colored on a terminal, plain in a pipe.

use std::io::IsTerminal;
use std::sync::OnceLock;

/// The colors DEBUG output uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Color {
    Red,
    Green,
    Yellow,
    Blue,
    Magenta,
    Cyan,
    BrightBlue,
}

impl Color {
    fn sgr(self) -> &'static str {
        match self {
            Color::Red => "31",
            Color::Green => "32",
            Color::Yellow => "33",
            Color::Blue => "34",
            Color::Magenta => "35",
            Color::Cyan => "36",
            Color::BrightBlue => "94",
        }
    }
}

/// `text` in `color` when `enabled`, else `text` unchanged.
pub fn colored(text: &str, color: Color, enabled: bool) -> String {
    match enabled {
        true => format!("\x1b[{}m{text}\x1b[0m", color.sgr()),
        false => text.to_string(),
    }
}

/// Whether stderr is a terminal (decided once per process): DEBUG output is colored only then.
pub fn stderr_is_terminal() -> bool {
    static TERMINAL: OnceLock<bool> = OnceLock::new();
    *TERMINAL.get_or_init(|| std::io::stderr().is_terminal())
}

/// How many characters `text` shows: its length without ANSI escape sequences.
pub fn visible_width(text: &str) -> usize {
    let mut width = 0;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            chars.by_ref().find(|c| c.is_ascii_alphabetic());
        } else {
            width += 1;
        }
    }
    width
}

/// `text` followed by spaces up to `width` visible characters (`{:<width}` for colored text).
pub fn pad_to(text: &str, width: usize) -> String {
    format!("{text}{}", " ".repeat(width.saturating_sub(visible_width(text))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colored_text_pads_by_what_it_shows() {
        let red = colored("r_4", Color::Red, true);
        assert_eq!(red, "\x1b[31mr_4\x1b[0m");
        assert_eq!(visible_width(&red), 3);
        assert_eq!(visible_width(&pad_to(&red, 6)), 6);
        assert_eq!(colored("r_4", Color::Red, false), "r_4");
    }
}
