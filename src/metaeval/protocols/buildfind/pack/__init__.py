"""Build-and-find task packs, the protocol's input: `schema` types a task's three files (task,
spec, question bank), `load` checks and loads a pack naming every problem by file and field,
`expected_answers` reads what a perfect finder answers on each reference artifact,
`reference_builders` are the scripted builders that make those artifacts so a run goes end to
end without a model, and `scaffold` writes a one-task pack and run config to start from
(`metaeval buildfind init`).
"""
