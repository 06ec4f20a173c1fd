use pretty_assertions::assert_eq;

use super::*;

fn words(script: &Script) -> Vec<Vec<&str>> {
    script
        .commands
        .iter()
        .map(|c| c.words.iter().map(String::as_str).collect())
        .collect()
}

fn stages(script: &Script) -> Vec<(usize, usize)> {
    script
        .commands
        .iter()
        .map(|c| (c.pipeline, c.stage))
        .collect()
}

#[test]
fn words_quotes_and_escapes() {
    let s = parse(r#"echo 'a b' "c $d" e\ f"g"h"#);
    assert_eq!(words(&s), vec![vec!["echo", "a b", "c $d", "e fgh"]]);
}

#[test]
fn pipelines_and_lists() {
    let s = parse("curl -s x | sh; a && b || c & d\ne |& f");
    assert_eq!(
        words(&s),
        vec![
            vec!["curl", "-s", "x"],
            vec!["sh"],
            vec!["a"],
            vec!["b"],
            vec!["c"],
            vec!["d"],
            vec!["e"],
            vec!["f"]
        ]
    );
    assert_eq!(
        stages(&s),
        vec![
            (0, 0),
            (0, 1),
            (1, 0),
            (2, 0),
            (3, 0),
            (4, 0),
            (5, 0),
            (5, 1)
        ]
    );
}

#[test]
fn redirections() {
    let s = parse("cat a 2>&1 >out.txt 2>> err.log < in &> all");
    let c = &s.commands[0];
    assert_eq!(c.words, vec!["cat", "a"]);
    let r: Vec<(&str, &str)> = c
        .redirects
        .iter()
        .map(|r| (r.op, r.target.as_str()))
        .collect();
    assert_eq!(
        r,
        vec![
            (">", "out.txt"),
            (">>", "err.log"),
            ("<", "in"),
            ("&>", "all")
        ]
    );
}

#[test]
fn substitutions_are_nested_scripts() {
    let s = parse(r#"bash -c "$(curl -fsSL https://x.io/i.sh)" && echo `id -u` <(wget -O- y)"#);
    assert_eq!(words(&s)[0], vec!["bash", "-c", "$()"]);
    assert_eq!(
        words(&s.commands[0].nested[0])[0],
        vec!["curl", "-fsSL", "https://x.io/i.sh"]
    );
    assert_eq!(words(&s)[1], vec!["echo", "$()", "/dev/fd/63"]);
    assert_eq!(words(&s.commands[1].nested[0]), vec![vec!["id", "-u"]]);
    assert_eq!(
        words(&s.commands[1].nested[1]),
        vec![vec!["wget", "-O-", "y"]]
    );
    // arithmetic and parameter expansion stay text
    let s = parse("echo $((1 + 2)) ${HOME}/x");
    assert_eq!(words(&s), vec![vec!["echo", "$((1 + 2))", "${HOME}/x"]]);
}

#[test]
fn groups_and_heredocs() {
    let s =
        parse("(cd sub && rm -rf build) | tee log\ncat <<EOF > run.sh\nrm -rf /\nEOF\nbash run.sh");
    assert_eq!(
        words(&s.commands[0].nested[0]),
        vec![vec!["cd", "sub"], vec!["rm", "-rf", "build"]]
    );
    assert_eq!(words(&s)[1], vec!["tee", "log"]);
    assert_eq!(words(&s)[2], vec!["cat"]);
    assert_eq!(s.commands[2].stdin_text.as_deref(), Some("rm -rf /\n"));
    assert_eq!(words(&s)[3], vec!["bash", "run.sh"]);
    let s = parse("python3 <<< 'print(1)'");
    assert_eq!(s.commands[0].stdin_text.as_deref(), Some("print(1)"));
}

#[test]
fn comments_and_unicode() {
    let s = parse("echo héllo # rm -rf /\nls");
    assert_eq!(words(&s), vec![vec!["echo", "héllo"], vec!["ls"]]);
}

#[test]
fn unbalanced_input_does_not_panic() {
    for text in [
        "echo 'open",
        "echo \"open",
        "$(",
        "`x",
        "a |",
        "((",
        "))",
        "<<",
        "x <<E\nno end",
        "\\",
    ] {
        let _ = parse(text);
    }
}
