// Package importgraph is the walk behind the layering tests (engines/, gen/, cmd/toy/) that hold
// packages to importing only what lies below them: it lists the imports of each Go file of a
// folder (or a tree), and each test states its rule over that list. Which files count (test
// files, subfolders, testdata, hidden folders) is the test's choice, in Options; build
// constraints never are: every file is read whatever its //go:build line, since a layering
// rule holds in every build (cuda, metal, portable), not only the one running the test.
package importgraph

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// Options choose the files a walk reads. The zero value reads the non-test .go files of the
// root folder alone.
type Options struct {
	// Subdirs walks the folders below the root too.
	Subdirs bool
	// Tests reads the _test.go files too (File.Test marks them).
	Tests bool
	// SkipTestdata leaves out the folders named testdata (the tests' inputs) and all below them.
	SkipTestdata bool
	// SkipHidden leaves out the folders whose names begin with a dot (the root aside).
	SkipHidden bool
}

// File is one Go file a walk read, with what it imports.
type File struct {
	// Path is the file's path: the root joined with its path below the root.
	Path string
	// Dir is the file's folder relative to the root, with slashes ("." for the root itself).
	Dir string
	// Test says the file is a _test.go file.
	Test bool
	// Imports are the import paths the file names, in the order it names them.
	Imports []string
}

// Walk reads the .go files under root that opts choose, in the lexical order of their paths,
// parsing only their imports; a root that cannot be read or a file that does not parse is an
// error that names it.
func Walk(root string, opts Options) ([]File, error) {
	fset := token.NewFileSet()
	var files []File
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (!opts.Subdirs || opts.SkipTestdata && d.Name() == "testdata" ||
				opts.SkipHidden && strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		test := strings.HasSuffix(path, "_test.go")
		if !strings.HasSuffix(path, ".go") || test && !opts.Tests {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		file := File{Path: path, Dir: filepath.ToSlash(dir), Test: test}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value) // the parser refuses a path that is not a string
			file.Imports = append(file.Imports, p)
		}
		files = append(files, file)
		return nil
	})
	return files, err
}
