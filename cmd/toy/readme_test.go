package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	// A command the README's list names: toy NAME (with the variant a flag makes its own
	// command: -recipe dflash, -arch vit), bench SUB, tokenizer train.
	readmeCommand = regexp.MustCompile(`\btoy ([a-z][a-z-]*)( -recipe dflash| -arch vit)?|\bbench (matmul|model|train|finetune|serve)\b|\btokenizer train\b`)
	// A flag: -name or --name after a space, a bracket, a parenthesis or a bar.
	readmeFlag = regexp.MustCompile(`(?:^|[\s\[(|])--?([a-z][a-z0-9-]*)`)
	// A flag as a command's -h lists it.
	helpFlag = regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)
)

// commandNames are the names of toy's commands, as its help lists them.
func commandNames() []string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return names
}

// helpFlagLister returns a function that lists the flags toy ARGS -h prints (with -h and
// -help), running each -h once.
func helpFlagLister(t *testing.T) func(args []string) []string {
	flagsOf := map[string][]string{}
	return func(args []string) []string {
		key := strings.Join(args, " ")
		if f, ok := flagsOf[key]; ok {
			return f
		}
		_, errOut, code := runToy(append(args, "-h")...)
		require.Equal(t, 0, code, "toy %s -h", key)
		flags := []string{"h", "help"}
		for _, m := range helpFlag.FindAllStringSubmatch(errOut, -1) {
			flags = append(flags, m[1])
		}
		flagsOf[key] = flags
		return flags
	}
}

// TestReadmeCommands holds README.md's command list to toy: it names every command of toy's
// help and no other, and each flag it writes under a command is one that command's -h lists
// (or one of a command the entry names: toy chat's entry names toy generate -cnv, toy
// generate's the toy train that makes a draft model).
func TestReadmeCommands(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(readme), "\n## Commands\n\n```\n")
	require.True(t, ok, "README.md has no command list")
	block, _, _ = strings.Cut(block, "\n```")

	names := commandNames()
	helpFlags := helpFlagLister(t)

	// The entries: a line starting with "toy " and the indented lines after it.
	var entries []string
	for _, line := range strings.Split(block, "\n") {
		if strings.HasPrefix(line, "toy ") {
			entries = append(entries, line)
		} else if len(entries) > 0 {
			entries[len(entries)-1] += "\n" + line
		}
	}
	listed := map[string]bool{}
	for _, entry := range entries {
		var invocations [][]string
		for _, m := range readmeCommand.FindAllStringSubmatch(entry, -1) {
			var args []string
			switch {
			case m[1] != "":
				require.Contains(t, names, m[1], "README.md's command list names toy %s, which toy does not have", m[1])
				listed[m[1]] = true
				if m[1] == "bench" || m[1] == "tokenizer" {
					continue // their flags are their subcommands'
				}
				args = []string{m[1]}
				if m[2] != "" {
					args = append(args, strings.Fields(m[2])...)
				}
			case m[3] != "":
				args = []string{"bench", m[3]}
			default:
				args = []string{"tokenizer", "train"}
			}
			invocations = append(invocations, args)
		}
		require.NotEmpty(t, invocations, "an entry of README.md's command list names no command: %s", entry)
		for _, m := range readmeFlag.FindAllStringSubmatch(entry, -1) {
			flag := m[1]
			known := slices.ContainsFunc(invocations, func(args []string) bool { return slices.Contains(helpFlags(args), flag) })
			assert.True(t, known, "README.md's command list gives -%s in the entry of %q, which none of %v lists", flag, strings.SplitN(entry, "\n", 2)[0], invocations)
		}
	}
	for _, name := range names {
		assert.True(t, listed[name], "README.md's command list does not name toy %s", name)
	}
}

var (
	// An invocation in the docs: toy CMD and the rest of its span or line (up to a | or ;).
	docInvocation = regexp.MustCompile(`(?:^|[\s$(])(?:\./)?(?:bin/)?toy ([a-z][a-z-]*)((?: [^|;]*)?)`)
	benchName     = regexp.MustCompile(`^\s*(matmul|model|train|finetune|serve)\b`)
	codeSpan      = regexp.MustCompile("`([^`\n]+)`")
	codeBlock     = regexp.MustCompile("(?s)```[a-z]*\n(.*?)```")
)

// TestDocsCommandFlags holds the toy command lines the docs give (in code spans and code blocks
// of README.md, docs/*.md but the journal, kernels/README.md and engines/README.md) to toy: every
// flag written after toy CMD (toy bench SUB, toy tokenizer train; toy train -recipe dflash and
// toy train -arch vit with their own flags) is one that command's -h lists.
func TestDocsCommandFlags(t *testing.T) {
	docs := []string{"../../README.md", "../../kernels/README.md", "../../engines/README.md"}
	more, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	for _, d := range more {
		if !strings.HasSuffix(d, "PERFORMANCE-HISTORY.md") { // the journal keeps the flags of its day
			docs = append(docs, d)
		}
	}
	names := commandNames()
	helpFlags := helpFlagLister(t)
	checked := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		text := string(b)
		var spans []string
		for _, m := range codeBlock.FindAllStringSubmatch(text, -1) {
			spans = append(spans, strings.Split(m[1], "\n")...)
			text = strings.Replace(text, m[0], "", 1)
		}
		for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
			spans = append(spans, m[1])
		}
		for _, span := range spans {
			for _, m := range docInvocation.FindAllStringSubmatch(span, -1) {
				name, rest := m[1], m[2]
				if !slices.Contains(names, name) {
					continue
				}
				args := []string{name}
				switch {
				case name == "bench":
					sub := benchName.FindStringSubmatch(rest)
					if sub == nil {
						continue
					}
					args = append(args, sub[1])
				case name == "tokenizer":
					args = append(args, "train")
				case name == "train" && strings.Contains(rest, "-recipe dflash"):
					args = append(args, "-recipe", "dflash")
				case name == "train" && strings.Contains(rest, "-arch vit"):
					args = []string{"train-vit"}
				}
				flags := helpFlags(args)
				for _, f := range readmeFlag.FindAllStringSubmatch(rest, -1) {
					checked++
					assert.Contains(t, flags, f[1], "%s: toy %s has no -%s (in %q)", strings.TrimPrefix(doc, "../../"), strings.Join(args, " "), f[1], span)
				}
			}
		}
	}
	require.Greater(t, checked, 100, "the docs' command lines were not found")
}
