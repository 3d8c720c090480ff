//! The pictures of the in-memory session of `tests.rs`: the DOT graph,
//! the HTML page's parts (timeline bars, the beside section), the page in
//! headless Chromium and the DAG drawn by Graphviz.

use super::*;

#[test]
fn dot_joins_the_path_to_the_failure_with_solid_red_edges() {
    let (d, _) = diagnosis();
    let path = d.discovery.as_ref().unwrap().path.clone();
    let text = dot::render(&d.analysis, &path, "run");
    let last = path.last().unwrap();
    assert!(text.contains(&format!("n{} -> n0 [color=red, penwidth=2.5];", last.0)), "{text}");
    assert!(!text.contains("dashed"), "{text}");
    for line in text.lines().filter(|l| l.contains("label=")) {
        let label = line.split("label=\"").nth(1).unwrap().split('"').next().unwrap();
        for part in label.split("\\l") {
            assert!(part.chars().count() <= dot::LABEL_WIDTH, "{part}");
        }
    }
}

#[test]
fn html_page_is_self_contained_with_every_part() {
    let (d, intervened) = diagnosis();
    let r = build(&d);
    let shown = intervened.iter().find(|x| x.label == Label::Pass);
    let page = html::render(&r, &d, shown, &Beside::default());
    for part in [
        "id=\"root-cause\"",
        "id=\"causal-path\"",
        "<svg id=\"dag\"",
        "class=\"edge on-path\" data-from=",
        "data-to=\"F\"",
        "class=\"timeline fail\"",
        "class=\"timeline pass\"",
        "class=\"mark mark-pred\"",
        "class=\"mark mark-iv\"",
        "id=\"ranking\"",
    ] {
        assert!(page.contains(part), "no {part} in the page");
    }
    for remote in ["http://", "https://", "<script", "<link", "@import"] {
        let hits: Vec<&str> = page.matches(remote).collect();
        // The SVG namespace is a name, not a fetch.
        let allowed = page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count();
        if remote == "http://" {
            assert_eq!(hits.len(), allowed, "a remote reference in the page");
        } else {
            assert!(hits.is_empty(), "{remote} in the page");
        }
    }
}

/// The timeline's bars as (label, tooltip) in the order drawn, of the
/// timeline of class `which`.
fn bars(page: &str, which: &str) -> Vec<(String, String)> {
    let start = page.find(&format!("<section class=\"timeline {which}\"")).unwrap();
    let section = &page[start..start + page[start..].find("</section>").unwrap()];
    section
        .split("<g class=\"call\"><title>")
        .skip(1)
        .map(|g| {
            let title = g.split("</title>").next().unwrap();
            let label = g.split("class=\"bar-label\"").nth(1).unwrap();
            let label = label.split('>').nth(1).unwrap().split('<').next().unwrap();
            (label.to_owned(), title.to_owned())
        })
        .collect()
}

/// Regression: the timeline's bars had no labels. Each bar shows its
/// call ("fetch#1") and its tooltip when it started and how long it took.
#[test]
fn html_timeline_bars_are_labelled_with_their_call() {
    let (d, intervened) = diagnosis();
    let r = build(&d);
    let shown = intervened.iter().find(|x| x.label == Label::Pass);
    let page = html::render(&r, &d, shown, &Beside::default());
    let own = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect()
    };
    assert_eq!(
        bars(&page, "fail"),
        own(&[
            (
                "init_cache#1",
                "call 1 of init_cache on main: start +0 ns, duration 112 µs, returned 0"
            ),
            ("fetch#1", "call 1 of fetch on fetcher: start +129 µs, duration 9.03 ms, returned 0"),
            (
                "use_cache#1",
                "call 1 of use_cache on reader: start +3.03 ms, duration 28 µs, returned 4"
            ),
        ])
    );
    // The passing run under the root cause's intervention: fetch returned
    // at once.
    assert_eq!(
        bars(&page, "pass"),
        own(&[
            (
                "init_cache#1",
                "call 1 of init_cache on main: start +0 ns, duration 104 µs, returned 0"
            ),
            ("fetch#1", "call 1 of fetch on fetcher: start +116 µs, duration 1 µs, returned 0"),
            (
                "use_cache#1",
                "call 1 of use_cache on reader: start +2.98 ms, duration 59 µs, returned 3"
            ),
        ])
    );
}

/// Labels and tooltips of one hand-made call, exactly.
#[test]
fn a_bar_label_names_the_call_and_its_tooltip_its_times() {
    let c = call(1, 1, 2, 5_000 * US, Some(14_300 * US), Some(-1));
    assert_eq!(html::bar_label(&c, "fetch"), "fetch#2");
    assert_eq!(
        html::bar_title(&c, "fetch", "fetcher#1", 1_000 * US),
        "call 2 of fetch on fetcher#1: start +4 ms, duration 9.3 ms, returned -1"
    );
    let hung = call(1, 1, 3, 20_000 * US, None, None);
    assert_eq!(
        html::bar_title(&hung, "fetch", "fetcher#1", 1_000 * US),
        "call 3 of fetch on fetcher#1: start +19 ms, did not return"
    );
}

/// What the other explainers add, as the examples of `beside` show it.
fn beside_example() -> Beside {
    Beside {
        pattern: Some(TopPattern {
            text: "⟨w2:use_cache(c) | w1:fetch(c)⟩".into(),
            deps: vec!["R w2:use_cache(c) → W w1:fetch(c) (anti)".into(), "second".into()],
            rel_supp: 1.0,
            failing_runs: 9,
            failing_total: 10,
            passing_runs: 0,
            passing_total: 12,
            shape: Some(Shape::Before),
            tested: vec![TestedAs {
                pred: PredId(2),
                description: "use_cache<1> ends before fetch starts".into(),
                fate: Fate::RootCause,
            }],
            noun: "run",
        }),
        chain: Some(Chain {
            fail: 4,
            pass: 1,
            steps: vec!["order <a> & b".into(), "the run fails".into()],
        }),
        patterns_file: None,
        pattern_predicates: Vec::new(),
        notes: vec!["no watched runs: why".into()],
    }
}

/// Regression: report.html lacked the "Beside the causal path" section
/// that report.txt ends with. The same lines, an item per line, escaped.
#[test]
fn html_has_the_beside_section_of_report_txt() {
    let (d, intervened) = diagnosis();
    let r = build(&d);
    let shown = intervened.iter().find(|x| x.label == Label::Pass);
    let b = beside_example();
    let page = html::render(&r, &d, shown, &b);
    let start = page.find("<h2>Beside the causal path</h2>").expect("the section");
    let section = &page[start..start + page[start..].find("\n</ul>\n").unwrap() + 7];
    assert_eq!(
        section,
        "<h2>Beside the causal path</h2>\n<ul class=\"beside\" id=\"beside\">\n\
         <li>Mined pattern (in 9 of 10 failing and 0 of 12 passing runs), one thread&#39;s accesses come before another thread&#39;s, tested through the predicates that state how its calls meet (below, with what became of each): ⟨w2:use_cache(c) | w1:fetch(c)⟩<ul><li>dependence: R w2:use_cache(c) → W w1:fetch(c) (anti) (and 1 more)</li><li>P2 use_cache&lt;1&gt; ends before fetch starts: the root cause, confirmed</li></ul></li>\n\
         <li>Run 4 (failed) against run 1 (passed), from the dual slice, untested (`aid-agent compare --fail 4 --pass 1` tests the links it can force, with re-runs):<ul><li>order &lt;a&gt; &amp; b ⇒ the run fails</li></ul></li>\n\
         <li>(no watched runs: why)</li>\n</ul>\n"
    );
    // The same words as report.txt's section, line for line.
    let text: Vec<String> =
        beside::render(&b).lines().skip(2).map(|l| l.trim().to_owned()).collect();
    let html_lines: Vec<String> = section
        .split("<li>")
        .skip(1)
        .map(|l| {
            l.split('<')
                .next()
                .unwrap()
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&#39;", "'")
                .replace("&amp;", "&")
        })
        .collect();
    assert_eq!(html_lines, text);
    // Nothing to add: no section.
    let page = html::render(&r, &d, shown, &Beside::default());
    assert!(!page.contains("Beside the causal path"));
}

/// Pixels of a PNG screenshot as RGB triples, with its size.
fn pixels(path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = info.color_type.samples();
    let rgb = buf[..info.buffer_size()].chunks(step).map(|p| [p[0], p[1], p[2]]).collect();
    (info.width, info.height, rgb)
}

/// Headless Chromium (installed by `cargo xtask setup`) loads report.html
/// from disk with the network off: the DOM it builds has every part, and
/// its screenshot shows the red causal path and both timelines.
#[test]
#[ignore = "needs chromium: `cargo xtask test` runs it"]
fn report_html_in_headless_chromium() {
    let (d, intervened) = diagnosis();
    let r = build(&d);
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("report.html");
    let shown = intervened.iter().find(|x| !x.failed());
    std::fs::write(&page, html::render(&r, &d, shown, &beside_example())).unwrap();
    let chromium = |extra: &[String]| {
        let profile = tempfile::tempdir().unwrap();
        let out = Command::new("timeout")
            .args(["120", "chromium", "--headless", "--no-sandbox", "--disable-gpu"])
            .args(["--disable-quic", "--no-first-run", "--disable-background-networking"])
            .args(["--disable-component-update", "--disable-sync"])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(extra)
            .arg(format!("file://{}", page.display()))
            .output()
            .expect("chromium: run `cargo xtask setup`");
        assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let dom = chromium(&["--dump-dom".into()]);
    let path = &d.discovery.as_ref().unwrap().path;
    assert_eq!(dom.matches("class=\"node on-path\"").count(), path.len(), "{dom}");
    assert_eq!(dom.matches("class=\"node failure\"").count(), 1);
    // Every link of the path, and the last to F, drawn in red.
    assert_eq!(dom.matches("class=\"edge on-path\"").count(), path.len());
    assert_eq!(dom.matches("<section class=\"timeline").count(), 2);
    // Every bar labelled, and the section beside the path there.
    assert_eq!(
        dom.matches("class=\"bar-label\"").count(),
        dom.matches("<rect class=\"slice").count()
    );
    assert_eq!(dom.matches("<ul class=\"beside\" id=\"beside\">").count(), 1);
    assert_eq!(dom.matches("<li data-pred=").count(), path.len());
    let rows = r.analysis.rows.len().min(30);
    assert_eq!(
        dom.matches("<tr data-pred=").count() + dom.matches("<tr class=\"on-path\"").count(),
        rows
    );
    let shot = tmp.path().join("shot.png");
    chromium(&["--window-size=1300,2600".into(), format!("--screenshot={}", shot.display())]);
    let (w, h, px) = pixels(&shot);
    assert_eq!((w, h), (1300, 2600));
    let near = |p: &[u8; 3], c: [u8; 3]| p.iter().zip(c).all(|(a, b)| a.abs_diff(b) < 24);
    // The path's red (#d0341b): boxes, edges, the root cause bar, the F node.
    let red = px.iter().filter(|p| near(p, [0xd0, 0x34, 0x1b])).count();
    // The timeline's bars of causal-path calls (#f19a86); the legend's
    // swatch alone is 100 pixels.
    let bars = px.iter().filter(|p| near(p, [0xf1, 0x9a, 0x86])).count();
    assert!(red > 2_000, "{red} red pixels: the path is not drawn");
    assert!(bars > 1_000, "{bars} call-bar pixels: the timeline is not drawn");
}

/// `debug --svg`: Graphviz (installed by `cargo xtask setup`) draws
/// dag.dot, path in red.
#[test]
#[ignore = "needs graphviz: `cargo xtask test` runs it"]
fn graphviz_draws_the_dag() {
    let (d, _) = diagnosis();
    let path = d.discovery.as_ref().unwrap().path.clone();
    let svg = dot::svg(&dot::render(&d.analysis, &path, "run")).unwrap().expect("graphviz `dot`");
    assert!(svg.contains("<svg"), "{svg}");
    assert!(svg.contains("F: the run fails"));
    assert!(svg.matches("stroke=\"red\"").count() > path.len(), "{svg}");
}
