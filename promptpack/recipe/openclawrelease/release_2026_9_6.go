package openclawrelease

// release2026_9_6 is OpenClaw 2026.9.6 (npm package openclaw@2026.9.6).
// Its files are the chunks of the package's dist/ that hold the text of the
// system prompt: the builder and the modules it takes section text from.
// The hashes (files, fragment table, slot anchors) were taken from the
// package as published and are checked against an install by
// TestInstalledOpenClaw; go test -run TestInstalledOpenClaw -update
// regenerates releases/openclaw-2026.9.6.fragments.
var release2026_9_6 = &Release{
	OpenClawVersion: "2026.9.6",
	Files:           files2026_9_6,
	TableFile:       "openclaw-2026.9.6.fragments",
	TableSHA256:     table2026_9_6,
	// Slots: the date and time zone of the temporal context, the workspace
	// and docs directories, the path heading each bootstrap file, the
	// model identity line, the three fields of each skill entry, and the
	// project key of the memory-writing instruction.
	Slots: []slotRule{
		{Name: "time.date", After: anchorTimeDate, Class: lineText, Max: 64},
		{Name: "time.zone", After: anchorTimeZone, Class: lineText, Max: 128},
		{Name: "runtime.workspace_dir", After: anchorRuntimeWorkspaceDir, Class: lineText, Max: 4096},
		{Name: "runtime.docs_dir", After: anchorRuntimeDocsDir, Class: lineText, Max: 4096},
		{Name: slotContextPath, After: anchorContextPath, Class: lineText, Max: 4096},
		{Name: "runtime.model", After: anchorRuntimeModel, Class: lineText, Max: 512},
		{Name: "skill.name", After: anchorSkillName, Class: xmlText, Max: 256},
		{Name: "skill.description", After: anchorSkillDescription, Class: xmlText, Max: 4096},
		{Name: "skill.location", After: anchorSkillLocation, Class: xmlText, Max: 4096},
		{Name: "memory.project_key", After: anchorMemoryProjectKey, Class: xmlText, Max: 1024},
	},
}
