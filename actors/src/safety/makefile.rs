//! Just enough of a Makefile for review: variables (`=`, `:=`, `?=`,
//! `+=`), rules with their prerequisites and recipes (with `\` line
//! continuations), and the default goal. Recipes of the goals and their
//! prerequisites come out with the file's own variables expanded and the
//! `@`/`-`/`+` prefixes removed, ready to be reviewed as shell.

use std::collections::BTreeMap;

/// What review needs of a Makefile: variables, rules with recipes, the
/// default goal.
pub(crate) struct Makefile {
    vars: BTreeMap<String, String>,
    rules: BTreeMap<String, (Vec<String>, Vec<String>)>,
    /// The first ordinary target.
    pub(crate) default_goal: Option<String>,
}

impl Makefile {
    /// Reads the variables, rules and default goal of a Makefile.
    pub(crate) fn parse(source: &str) -> Self {
        let mut m = Makefile {
            vars: BTreeMap::new(),
            rules: BTreeMap::new(),
            default_goal: None,
        };
        let mut current: Vec<String> = Vec::new();
        let mut lines = source.lines().peekable();
        while let Some(line) = lines.next() {
            let mut line = line.to_owned();
            while line.ends_with('\\') {
                line.pop();
                match lines.next() {
                    Some(next) => line.push_str(next.trim_start()),
                    None => break,
                }
            }
            if let Some(recipe) = line.strip_prefix('\t') {
                for t in &current {
                    if let Some(rule) = m.rules.get_mut(t) {
                        rule.1
                            .push(recipe.trim_start_matches(['@', '-', '+']).to_owned());
                    }
                }
                continue;
            }
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            if let Some((name, value)) = assignment(trimmed) {
                let (op_append, name) = name;
                let entry = m.vars.entry(name).or_default();
                if op_append {
                    entry.push(' ');
                    entry.push_str(&value);
                } else {
                    *entry = value;
                }
                current.clear();
                continue;
            }
            if let Some((targets, prereqs)) = trimmed.split_once(':') {
                let prereqs = prereqs
                    .trim_start_matches(':')
                    .split(';')
                    .next()
                    .unwrap_or("");
                let prereqs: Vec<String> = prereqs
                    .split_whitespace()
                    .filter(|p| *p != "|")
                    .map(str::to_owned)
                    .collect();
                current = targets.split_whitespace().map(str::to_owned).collect();
                for t in &current {
                    if m.default_goal.is_none() && !t.starts_with('.') && !t.contains('%') {
                        m.default_goal = Some(t.clone());
                    }
                    m.rules
                        .entry(t.clone())
                        .or_default()
                        .0
                        .extend(prereqs.iter().cloned());
                }
                continue;
            }
            current.clear();
        }
        m
    }

    /// The recipes of `goals` and their prerequisites (each once), with
    /// variables expanded.
    pub(crate) fn recipes(&self, goals: &[String]) -> String {
        let mut seen = Vec::new();
        let mut out = String::new();
        for g in goals {
            self.collect(g, &mut seen, &mut out, 0);
        }
        out
    }

    fn collect(&self, target: &str, seen: &mut Vec<String>, out: &mut String, depth: u8) {
        if depth > 8 || seen.iter().any(|s| s == target) {
            return;
        }
        seen.push(target.to_owned());
        let Some((prereqs, recipe)) = self.rules.get(target) else {
            return;
        };
        for p in prereqs {
            self.collect(&self.expand(p), seen, out, depth + 1);
        }
        for line in recipe {
            out.push_str(&self.expand(line));
            out.push('\n');
        }
    }

    /// `$(NAME)` and `${NAME}` from the file's variables (one level deep,
    /// then the result again up to 4 times), `$$` → `$`.
    fn expand(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for _ in 0..4 {
            let mut out = String::with_capacity(text.len());
            let mut rest = text.as_str();
            let mut changed = false;
            while let Some(at) = rest.find('$') {
                out.push_str(&rest[..at]);
                let after = &rest[at + 1..];
                let close = match after.chars().next() {
                    Some('(') => Some(')'),
                    Some('{') => Some('}'),
                    Some('$') => {
                        out.push_str("$$");
                        rest = &after[1..];
                        continue;
                    }
                    _ => None,
                };
                match close.and_then(|c| after[1..].find(c).map(|end| &after[1..1 + end])) {
                    Some(name) if self.vars.contains_key(name) => {
                        out.push_str(self.vars.get(name).map(String::as_str).unwrap_or(""));
                        rest = &after[name.len() + 2..];
                        changed = true;
                    }
                    _ => {
                        out.push('$');
                        rest = after;
                    }
                }
            }
            out.push_str(rest);
            text = out;
            if !changed {
                break;
            }
        }
        text.replace("$$", "$")
    }
}

/// `NAME = value`, `NAME := value`, `NAME ?= value`, `NAME += value`:
/// ((append, name), value).
fn assignment(line: &str) -> Option<((bool, String), String)> {
    let eq = line.find('=')?;
    let colon = line.find(':');
    if colon.is_some_and(|c| c < eq && line[c..eq].trim() != ":" && line[c..eq].trim() != "::") {
        return None;
    }
    let head = line[..eq].trim_end();
    let (append, name) = if let Some(n) = head.strip_suffix('+') {
        (true, n)
    } else {
        (false, head.trim_end_matches([':', '?', '!']))
    };
    let name = name.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return None;
    }
    Some(((append, name.to_owned()), line[eq + 1..].trim().to_owned()))
}
