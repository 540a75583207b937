use super::*;
use serde::Deserialize;
use serde_json::json;

// ----- JSON ---------------------------------------------------------------------------

#[test]
fn json_in_a_fence_amid_prose() {
    let answer = "Sure! Based on the profile, the kernel is memory bound.\n\
            \n\
            ```json\n\
            {\n  \"hypothesis\": \"vectorize the loads\",\n  \"steps\": [\"use float4\", \"unroll by 4\"]\n}\n\
            ```\n\
            \n\
            Let me know if you want a different approach.";
    assert_eq!(
        first_json_object(answer).unwrap(),
        json!({"hypothesis": "vectorize the loads", "steps": ["use float4", "unroll by 4"]})
    );
}

#[test]
fn json_fence_is_preferred_over_an_earlier_object_in_prose() {
    let answer = "The format is {\"idea\": \"...\"}, as asked.\n\
            ```JSON\n{\"idea\": \"tile the reduction\"}\n```";
    assert_eq!(
        first_json_object(answer).unwrap(),
        json!({"idea": "tile the reduction"})
    );
}

#[test]
fn unfenced_json_after_prose() {
    let answer = "My answer:\n{\"block\": 256, \"unroll\": 4}\nThat should help.";
    assert_eq!(first_json_object(answer).unwrap(), json!({"block": 256, "unroll": 4}));
}

#[test]
fn trailing_commas_are_repaired_outside_strings_only() {
    let answer = "```json\n{\n  \"steps\": [\n    \"a, ]\",\n    \"b,}\",\n  ],\n  \"done\": false,\n}\n```";
    assert_eq!(
        first_json_object(answer).unwrap(),
        json!({"steps": ["a, ]", "b,}"], "done": false})
    );
}

#[test]
fn comments_are_removed_outside_strings() {
    let answer = "{\n  // the block size\n  \"block\": 128, /* was 64 */\n  \"url\": \"http://example.com/a\",\n}";
    assert_eq!(
        first_json_object(answer).unwrap(),
        json!({"block": 128, "url": "http://example.com/a"})
    );
}

#[test]
fn raw_newlines_and_tabs_in_strings_are_escaped() {
    let answer = "{\"code\": \"for (;;) {\n\tbreak;\n}\", \"n\": 1}";
    assert_eq!(
        first_json_object(answer).unwrap(),
        json!({"code": "for (;;) {\n\tbreak;\n}", "n": 1})
    );
}

#[test]
fn a_byte_order_mark_is_ignored() {
    assert_eq!(first_json_object("\u{feff}{\"a\": 1}").unwrap(), json!({"a": 1}));
}

#[test]
fn a_broken_example_in_prose_is_skipped() {
    let answer = "I will answer in the form {\"steps\": [...], \"notes\": \"...\"}.\n\
            \n\
            {\"steps\": [{\"kind\": \"tile\", \"size\": 64}], \"notes\": \"first try\"}";
    assert_eq!(
        first_json_object(answer).unwrap(),
        json!({"steps": [{"kind": "tile", "size": 64}], "notes": "first try"})
    );
}

#[test]
fn braces_and_escaped_quotes_inside_strings() {
    let answer = "Plan: {\"note\": \"{not a brace}\", \"code\": \"if (x) { y(); }\", \"quote\": \"say \\\"}\\\" {\", \"n\": 2} done";
    assert_eq!(
        first_json_object(answer).unwrap(),
        json!({"note": "{not a brace}", "code": "if (x) { y(); }", "quote": "say \"}\" {", "n": 2})
    );
}

#[test]
fn an_empty_object_is_taken_only_when_nothing_else_parses() {
    let answer = "Use {} when there are no options.\n{\"options\": {\"fast_math\": true}}";
    assert_eq!(
        first_json_object(answer).unwrap(),
        json!({"options": {"fast_math": true}})
    );
    assert_eq!(first_json_object("Nothing to change: {}").unwrap(), json!({}));
}

#[test]
fn truncated_json_is_reported_as_truncated() {
    let answer = "Here is the plan.\n\n```json\n{\n  \"steps\": [\n    {\"kind\": \"tile\", \"size\": 64},\n    {\"kind\": \"unr";
    let err = first_json_object(answer).unwrap_err();
    assert_eq!(
        err,
        ExtractError::InvalidJson {
            line: 4,
            message: "EOF while parsing a string at line 7 column 18".to_owned(),
            truncated: true,
        }
    );
    assert!(err.is_truncated());
    assert_eq!(
            err.to_string(),
            "the JSON object starting at line 4 does not parse: EOF while parsing a string at line 7 column 18 — the answer looks truncated"
        );
}

#[test]
fn a_complete_inner_object_of_a_truncated_one_is_not_taken() {
    let answer = "{\"config\": {\"block\": 128}, \"steps\": [\"a\",";
    let err = first_json_object(answer).unwrap_err();
    assert!(err.is_truncated(), "{err}");
    assert_eq!(
            err.to_string(),
            "the JSON object starting at line 1 does not parse: EOF while parsing a value at line 1 column 42 — the answer looks truncated"
        );
}

#[test]
fn a_complete_inner_object_of_a_broken_one_is_not_taken() {
    let answer = "{\"config\": {\"block\": 128}, \"steps\": [1 2]}";
    assert_eq!(
        first_json_object(answer).unwrap_err().to_string(),
        "the JSON object starting at line 1 does not parse: expected `,` or `]` at line 1 column 40"
    );
}

#[test]
fn an_object_cut_short_in_a_closed_fence_is_not_called_truncated() {
    let answer = "```json\n{\"a\": [1, 2\n```\nDone.";
    let err = first_json_object(answer).unwrap_err();
    assert!(!err.is_truncated());
    assert_eq!(
        err.to_string(),
        "the JSON object starting at line 2 does not parse: EOF while parsing a list at line 3 column 1"
    );
}

#[test]
fn the_error_is_about_the_object_that_got_furthest() {
    let answer = "Think of {it} as a map.\n\n{\"steps\": [\"a\", \"b\"], \"notes\": 'single'}";
    assert_eq!(
        first_json_object(answer).unwrap_err().to_string(),
        "the JSON object starting at line 3 does not parse: expected value at line 3 column 32"
    );
}

#[test]
fn no_object_and_empty_answers() {
    assert_eq!(
        first_json_object("I cannot help with that.").unwrap_err().to_string(),
        "no JSON object found in the answer (it has 24 characters and no '{')"
    );
    assert_eq!(
        first_json_object("[1, 2]").unwrap_err(),
        ExtractError::NoJsonObject { chars: 6 }
    );
    assert_eq!(first_json_object(" \n ").unwrap_err(), ExtractError::EmptyAnswer);
}

#[derive(Debug, PartialEq, Deserialize)]
struct Step {
    kind: String,
    size: u32,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Plan {
    steps: Vec<Step>,
    notes: String,
}

#[test]
fn parse_json_as_takes_the_first_object_that_fits() {
    let answer = "Previous attempt was {\"speedup\": 1.3}.\n\
            ```json\n{\"steps\": [{\"kind\": \"tile\", \"size\": 64},], \"notes\": \"ok\"}\n```";
    assert_eq!(
        parse_json_as::<Plan>(answer).unwrap(),
        Plan {
            steps: vec![Step {
                kind: "tile".to_owned(),
                size: 64
            }],
            notes: "ok".to_owned()
        }
    );
    let unfenced = "Example: {\"speedup\": 1.3}\n{\"steps\": [], \"notes\": \"none\"}";
    assert_eq!(parse_json_as::<Plan>(unfenced).unwrap().notes, "none");
}

#[test]
fn parse_json_as_names_a_missing_field() {
    let answer = "```json\n{\n  \"steps\": [\n    {\"kind\": \"tile\", \"size\": 64},\n    {\"kind\": \"unroll\"}\n  ],\n  \"notes\": \"\"\n}\n```";
    let err = parse_json_as::<Plan>(answer).unwrap_err();
    assert_eq!(
        err,
        ExtractError::WrongShape {
            line: 2,
            message: "missing field `size`".to_owned(),
            path: "steps[1]".to_owned(),
            at_line: 5,
            at_column: 22,
        }
    );
    assert_eq!(
            err.to_string(),
            "the JSON object starting at line 2 does not have the expected form: missing field `size` at `steps[1]` (line 5, column 22)"
        );
}

#[test]
fn parse_json_as_names_a_field_of_the_wrong_type() {
    let answer = "{\"steps\": [{\"kind\": \"tile\", \"size\": \"64\"}], \"notes\": \"x\"}";
    assert_eq!(
            parse_json_as::<Plan>(answer).unwrap_err().to_string(),
            "the JSON object starting at line 1 does not have the expected form: invalid type: string \"64\", expected u32 at `steps[0].size` (line 1, column 40)"
        );
}

#[test]
fn parse_json_as_reports_top_level_and_unknown_fields() {
    assert_eq!(
            parse_json_as::<Plan>("{\"steps\": []}").unwrap_err().to_string(),
            "the JSON object starting at line 1 does not have the expected form: missing field `notes` at the top level (line 1, column 13)"
        );
    let err = parse_json_as::<Plan>("{\"steps\": [], \"notes\": \"\", \"risk\": \"low\"}").unwrap_err();
    assert!(
        matches!(&err, ExtractError::WrongShape { path, message, .. }
            if path == "risk" && message.starts_with("unknown field `risk`")),
        "{err}"
    );
}

#[test]
fn parse_json_as_reports_the_largest_object_when_none_fits() {
    let answer = "e.g. {\"a\": 1}\n{\"steps\": [{\"kind\": \"tile\", \"size\": -1}], \"notes\": \"\"}";
    let err = parse_json_as::<Plan>(answer).unwrap_err();
    assert!(
        matches!(&err, ExtractError::WrongShape { line: 2, path, .. } if path == "steps[0].size"),
        "{err}"
    );
}

#[test]
fn parse_json_as_passes_parse_errors_through() {
    assert_eq!(
        parse_json_as::<Plan>("nothing here").unwrap_err(),
        ExtractError::NoJsonObject { chars: 12 }
    );
}

#[test]
fn retry_instruction_wraps_the_error() {
    let err = ExtractError::NoJsonObject { chars: 10 };
    assert_eq!(
            retry_instruction(&err, "one JSON object in a ```json block."),
            "Your previous answer could not be used: no JSON object found in the answer (it has 10 characters and no '{'). Resend the complete answer as one JSON object in a ```json block."
        );
}

// ----- code files -----------------------------------------------------------------------

fn file(path: &str, language: Option<&str>, content: &str) -> CodeFile {
    CodeFile {
        path: path.to_owned(),
        language: language.map(str::to_owned),
        content: content.to_owned(),
    }
}

#[test]
fn file_tags_with_a_cu_and_h_pair() {
    let answer = "I split the kernel into a header and the implementation.\n\n\
            <file path=\"softmax.h\">\n#pragma once\nvoid softmax(const float *x, float *y, int n);\n</file>\n\n\
            <file name='softmax.cu' language=\"CUDA\">\n#include \"softmax.h\"\n__global__ void k(float *y) { y[0] = 1.0f; }\n\n</file>\n\
            Both files compile with nvcc.";
    assert_eq!(
        code_files(answer, Some("kernel.cu")).unwrap(),
        vec![
            file(
                "softmax.h",
                None,
                "#pragma once\nvoid softmax(const float *x, float *y, int n);\n"
            ),
            file(
                "softmax.cu",
                Some("cuda"),
                "#include \"softmax.h\"\n__global__ void k(float *y) { y[0] = 1.0f; }\n"
            ),
        ]
    );
}

#[test]
fn a_file_tag_around_a_fence_is_unwrapped() {
    let answer = "<FILE path=\"src/kernel.c\">\n```c\nint main(void) { return 0; }\n```\n</FILE>";
    assert_eq!(
        code_files(answer, None).unwrap(),
        vec![file("src/kernel.c", Some("c"), "int main(void) { return 0; }\n")]
    );
}

#[test]
fn file_tags_quoted_in_prose_are_not_files() {
    let answer = "As asked, I use `<file path=\"NAME\">` tags:\n<file path=\"k.c\">int x;</file>";
    assert_eq!(code_files(answer, None).unwrap(), vec![file("k.c", None, "int x;\n")]);
}

#[test]
fn fence_info_strings_that_name_the_file() {
    for (info, language) in [
        ("c kernel.c", Some("c")),
        ("cuda title=\"kernel.c\"", Some("cuda")),
        ("cpp filename='kernel.c'", Some("cpp")),
        ("c:kernel.c", Some("c")),
        ("kernel.c", None),
        ("{.c file=kernel.c}", Some("c")),
    ] {
        let answer = format!("Here you go:\n```{info}\nint x;\n```\n");
        assert_eq!(
            code_files(&answer, None).unwrap(),
            vec![file("kernel.c", language, "int x;\n")],
            "info string {info:?}"
        );
    }
}

#[test]
fn lines_before_a_fence_that_name_the_file() {
    for heading in [
        "**kernel.c**",
        "`kernel.c`",
        "File: kernel.c",
        "**File:** `kernel.c`",
        "// kernel.c",
        "### kernel.c",
        "#### 2. `kernel.c`",
        "- kernel.c:",
        "Here is the updated `kernel.c`:",
    ] {
        let answer = format!("The fix.\n\n{heading}\n\n```c\nint x;\n```\n");
        assert_eq!(
            code_files(&answer, None).unwrap(),
            vec![file("kernel.c", Some("c"), "int x;\n")],
            "heading {heading:?}"
        );
    }
}

#[test]
fn prose_before_a_fence_does_not_name_it() {
    // Not ending in a colon, or quoting two names: the block stays unnamed.
    for line in ["This replaces `kernel.c` entirely.", "Merge `a.c` and `b.c` into:"] {
        let answer = format!("{line}\n```c\nint x;\n```\n");
        assert_eq!(
            code_files(&answer, None).unwrap_err(),
            ExtractError::MissingFileName { line: 2 },
            "line {line:?}"
        );
    }
}

#[test]
fn first_line_comments_that_name_the_file() {
    for (first, path) in [
        ("// file: kernel.c", "kernel.c"),
        ("/* kernel.c */", "kernel.c"),
        ("// kernel.c", "kernel.c"),
        ("# file: launcher.py", "launcher.py"),
    ] {
        let answer = format!("```\n{first}\nint x;\n```\n");
        assert_eq!(
            code_files(&answer, None).unwrap(),
            vec![file(path, None, "int x;\n")],
            "first line {first:?}"
        );
    }
    // A comment that is not a file name stays in the code.
    assert_eq!(
        code_files("```c\n// naive version\nint x;\n```", Some("kernel.c")).unwrap(),
        vec![file("kernel.c", Some("c"), "// naive version\nint x;\n")]
    );
}

#[test]
fn cuda_and_header_pair_in_named_fences() {
    let answer = "Two files.\n\n**reduce.cuh**\n```cuda\n#pragma once\n__device__ float warp_sum(float v);\n```\n\n\
            **reduce.cu**\n```cuda\n#include \"reduce.cuh\"\n__device__ float warp_sum(float v) {\n    return v;\n}\n```\n\n\
            Compile with:\n```bash\nnvcc -O3 reduce.cu\n```\n";
    assert_eq!(
        code_files(answer, Some("kernel.cu")).unwrap(),
        vec![
            file(
                "reduce.cuh",
                Some("cuda"),
                "#pragma once\n__device__ float warp_sum(float v);\n"
            ),
            file(
                "reduce.cu",
                Some("cuda"),
                "#include \"reduce.cuh\"\n__device__ float warp_sum(float v) {\n    return v;\n}\n"
            ),
        ]
    );
}

#[test]
fn shorter_fences_nest_inside_longer_ones() {
    let answer =
        "````markdown README.md\n# Usage\n```c\nsoftmax(x, y, n);\n```\n````\n\n~~~c kernel.c\n```\nint x;\n~~~\n";
    assert_eq!(
        code_files(answer, None).unwrap(),
        vec![
            file("README.md", Some("markdown"), "# Usage\n```c\nsoftmax(x, y, n);\n```\n"),
            file("kernel.c", Some("c"), "```\nint x;\n"),
        ]
    );
}

#[test]
fn an_indented_fence_is_dedented() {
    let answer = "1. Replace the kernel:\n\n    ```c kernel.c\n    int f(void) {\n        return 1;\n    }\n    ```\n";
    assert_eq!(
        code_files(answer, None).unwrap(),
        vec![file("kernel.c", Some("c"), "int f(void) {\n    return 1;\n}\n")]
    );
}

#[test]
fn crlf_line_endings() {
    let answer = "**kernel.c**\r\n```c\r\nint x;\r\nint y;\r\n```\r\n";
    assert_eq!(
        code_files(answer, None).unwrap(),
        vec![file("kernel.c", Some("c"), "int x;\nint y;\n")]
    );
}

#[test]
fn a_single_unnamed_block_gets_the_default_name() {
    let answer = "The loop is now vectorized:\n\n```c\n#include <immintrin.h>\nvoid f(void) {}\n```\n\nRun it with:\n```sh\n./bench\n```";
    assert_eq!(
        code_files(answer, Some("kernel.c")).unwrap(),
        vec![file("kernel.c", Some("c"), "#include <immintrin.h>\nvoid f(void) {}\n")]
    );
    let err = code_files(answer, None).unwrap_err();
    assert_eq!(err, ExtractError::MissingFileName { line: 3 });
    assert_eq!(
        err.to_string(),
        "the code block at line 3 does not say which file it is; put it in a <file path=\"NAME\">...</file> tag"
    );
}

#[test]
fn several_unnamed_blocks_are_ambiguous() {
    let answer = "First:\n```c\nint a;\n```\nThen:\n```c\nint b;\n```\nAnd:\n```python\nprint(1)\n```";
    let err = code_files(answer, Some("kernel.c")).unwrap_err();
    assert_eq!(err, ExtractError::UnnamedBlocks { lines: vec![2, 6, 10] });
    assert_eq!(
            err.to_string(),
            "the answer has 3 code blocks without file names (at lines 2, 6 and 10), so it is not clear which file each one is; put each file in its own <file path=\"NAME\">...</file> tag"
        );
}

#[test]
fn unnamed_blocks_are_ignored_when_a_file_is_named() {
    let answer = "```c kernel.c\nint x;\n```\nCall it like this:\n```c\nint y = x;\n```";
    assert_eq!(
        code_files(answer, Some("other.c")).unwrap(),
        vec![file("kernel.c", Some("c"), "int x;\n")]
    );
}

#[test]
fn commands_quoting_a_file_name_are_not_that_file() {
    let answer = "Compile `kernel.c` with:\n```bash\ncc -O2 kernel.c\n```\n`kernel.c`\n```c\nint x;\n```";
    assert_eq!(
        code_files(answer, None).unwrap(),
        vec![file("kernel.c", Some("c"), "int x;\n")]
    );
    // ...but an explicitly named shell script is a file.
    let script = "```bash run.sh\necho hi\n```";
    assert_eq!(
        code_files(script, None).unwrap(),
        vec![file("run.sh", Some("bash"), "echo hi\n")]
    );
}

#[test]
fn paths_must_stay_inside_the_working_directory() {
    let err = code_files("<file path=\"../etc/passwd\">root</file>", None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the file path \"../etc/passwd\" is not allowed: it leaves the working directory ('..'); give a path inside it"
    );
    let err = code_files("```c /tmp/kernel.c\nint x;\n```", None).unwrap_err();
    assert_eq!(
            err.to_string(),
            "the file path \"/tmp/kernel.c\" is not allowed: it is absolute; give a path relative to the working directory, such as \"kernel.c\""
        );
    assert!(matches!(
        code_files("```c src\\kernel.c\nint x;\n```", None),
        Err(ExtractError::BadPath { .. })
    ));
    assert_eq!(
        code_files("```c ./src//kernel.c\nint x;\n```", None).unwrap()[0].path,
        "src/kernel.c"
    );
}

#[test]
fn a_file_given_twice_is_an_error() {
    let answer = "```c kernel.c\nint x;\n```\nOops, fixed:\n\n<file path=\"./kernel.c\">int y;</file>";
    let err = code_files(answer, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the file \"kernel.c\" is given twice (lines 1 and 6); send each file once, complete"
    );
}

#[test]
fn an_unclosed_fence_means_truncation() {
    let answer = "**kernel.c**\n```c\nvoid f(float *x) {\n    for (int i = 0; i < 1024; i++) {\n        x[i] *=";
    let err = code_files(answer, None).unwrap_err();
    assert_eq!(err, ExtractError::UnterminatedFence { line: 2 });
    assert!(err.is_truncated());
    assert_eq!(
        err.to_string(),
        "the code block starting at line 2 is not closed — the answer looks truncated"
    );
}

#[test]
fn unclosed_file_tags() {
    let err = code_files("<file path=\"a.c\">\nint x;\n", None).unwrap_err();
    assert_eq!(err, ExtractError::UnterminatedFileTag { line: 1 });
    assert_eq!(
        err.to_string(),
        "the <file> tag opened at line 1 is not closed with </file> — the answer looks truncated"
    );
    let err = code_files(
        "<file path=\"a.c\">\nint x;\n<file path=\"b.c\">\nint y;\n</file>",
        None,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the <file> tag opened at line 1 is not closed with </file> before the next <file> tag at line 3"
    );
    assert_eq!(
        code_files("<file>int x;</file>", None).unwrap_err(),
        ExtractError::FileTagWithoutPath { line: 1 }
    );
}

#[test]
fn answers_without_code() {
    assert_eq!(
            code_files("I think the kernel is already optimal.", Some("kernel.c"))
                .unwrap_err()
                .to_string(),
            "no code found in the answer: expected each file in a <file path=\"NAME\">...</file> tag or a fenced code block (```), and the answer has neither"
        );
    assert_eq!(
            code_files("```text\nspeedup 1.2x\n```\n```c\n\n```", Some("kernel.c"))
                .unwrap_err()
                .to_string(),
            "no code found in the answer: its fenced blocks hold no source file (line 1 is tagged `text`; the block at line 4 is empty); put each file in a <file path=\"NAME\">...</file> tag"
        );
    assert_eq!(
        code_files("<file path=\"k.c\">\n\n</file>", None).unwrap_err(),
        ExtractError::EmptyFile {
            path: "k.c".to_owned(),
            line: 1
        }
    );
    assert_eq!(code_files("", None).unwrap_err(), ExtractError::EmptyAnswer);
}

#[test]
fn an_empty_object_in_a_json_fence_beats_prose() {
    let answer = "Last time you sent {\"block\": 64}. Nothing to change now:\n```json\n{}\n```";
    assert_eq!(first_json_object(answer).unwrap(), json!({}));
}

#[test]
fn a_file_heading_with_trailing_words() {
    let answer = "File: `kernel.cu` (complete, replaces the old one)\n```cuda\n__global__ void k() {}\n```";
    assert_eq!(
        code_files(answer, None).unwrap(),
        vec![file("kernel.cu", Some("cuda"), "__global__ void k() {}\n")]
    );
}

#[test]
fn a_tag_between_a_heading_and_a_fence_cuts_them_apart() {
    let answer = "**main.c**\n<file path=\"util.h\">int f(void);</file>\n```c\nint x;\n```";
    assert_eq!(
        code_files(answer, Some("kernel.c")).unwrap(),
        vec![file("util.h", None, "int f(void);\n")]
    );
}

#[test]
fn file_tag_lookalikes_inside_code_are_code() {
    let answer = "```c kernel.c\nprintf(\"<file %s>\\n\", name);\n```";
    assert_eq!(
        code_files(answer, None).unwrap(),
        vec![file("kernel.c", Some("c"), "printf(\"<file %s>\\n\", name);\n")]
    );
}

#[test]
fn a_realistic_coder_answer() {
    let answer = "The previous version was latency bound on the row reduction. I now use one warp per row \
            and shuffle reductions.\n\n\
            <file path=\"softmax.cu\">\n\
            ```cuda\n\
            #include \"softmax.cuh\"\n\
            \n\
            __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int n) {\n\
            \x20   float m = -INFINITY;\n\
            \x20   for (int i = threadIdx.x; i < n; i += 32) m = fmaxf(m, x[i]);\n\
            \x20   m = warp_max(m);\n\
            }\n\
            ```\n\
            </file>\n\n\
            <file path=\"softmax.cuh\">\n\
            ```cuda\n\
            #pragma once\n\
            __device__ float warp_max(float v);\n\
            ```\n\
            </file>\n\n\
            To test locally:\n\n\
            ```bash\n\
            nvcc -O3 -arch=sm_90 softmax.cu -o softmax && ./softmax\n\
            ```\n";
    let files = code_files(answer, Some("kernel.cu")).unwrap();
    assert_eq!(
        files
            .iter()
            .map(|f| (f.path.as_str(), f.language.as_deref()))
            .collect::<Vec<_>>(),
        vec![("softmax.cu", Some("cuda")), ("softmax.cuh", Some("cuda"))]
    );
    assert_eq!(
            files[0].content,
            "#include \"softmax.cuh\"\n\n__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int n) {\n    float m = -INFINITY;\n    for (int i = threadIdx.x; i < n; i += 32) m = fmaxf(m, x[i]);\n    m = warp_max(m);\n}\n"
        );
    assert_eq!(files[1].content, "#pragma once\n__device__ float warp_max(float v);\n");
}
