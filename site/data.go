package site

import (
	"html/template"

	"github.com/cairn-dev/cairn/runbook"
)

// Page is the data every template gets (see docs/theme.md).
type Page struct {
	Site *SiteData
	Lang string
	T    Strings
	// TJSON is T as JSON for a <script type="application/json">.
	TJSON   template.JS
	Root    string // relative path to the site root
	Kind    string // runbook, index, 404
	Title   string
	Runbook *RunbookData
	JSON    template.JS
	Dev     bool
	// Executor is set when a local executor serves the page: its base URL.
	Executor string
	// Extra holds HTML a decorator adds at the end of <body>.
	Extra template.HTML
	// Current is the page's runbook in Site.Runbooks (nil on other pages);
	// Prev and Next are its neighbours there (nil at either end).
	Current, Prev, Next *RunbookSummary
	// EditURL links to the runbook's source for editing (Options.EditURL).
	EditURL string
}

// SiteData describes the whole site for navigation.
type SiteData struct {
	Title    string
	Lang     string
	Runbooks []RunbookSummary
	// NavCompact is set on sites with more than NavInlineMax runbooks:
	// pages then list only their own runbook in the sidebar and the page
	// script fills in the others from nav.js, so a page does not carry the
	// whole site's navigation.
	NavCompact bool
}

// NavInlineMax is the largest site whose every page lists every runbook.
const NavInlineMax = 50

// RunbookSummary is one runbook in navigation and on the index.
type RunbookSummary struct {
	Slug, Title, Summary string
	Tags                 []string
	Lang                 string
	Duration             string
	Steps                []StepData
}

// RunbookData is the runbook a page shows.
type RunbookData struct {
	Slug, Title, Summary string
	Path                 string
	Tags                 []string
	Duration             string
	Prerequisites        []template.HTML
	Params               []ParamData
	Steps                []StepData
	Hash                 string
	Content              template.HTML
	Requires             runbook.Requires
	// Extra is the front matter Cairn does not know (other tools' keys),
	// for themes: {{.Runbook.Extra.reviewers}}, as Hugo's .Params.
	Extra map[string]any
}

// ParamData is one parameter for the form.
type ParamData struct {
	Name, Label, Description, Type, Default, Pattern, Group string
	Values                                                  []string
	Secret, Required                                        bool
}

// StepData is one step for the table of contents.
type StepData struct {
	ID     string
	Number int
	Title  string
	When   string
}
