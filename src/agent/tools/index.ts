export {
  DEFAULT_TOOLS,
  EVERYTHING_EDITABLE,
  ToolRegistry,
  createDefaultToolRegistry,
} from './tool-registry.js';
export type { DefaultToolRegistryOptions, ToolRunContext } from './tool-registry.js';
export { DEFAULT_TOOL_LIMITS, defineTool } from './types.js';
export type {
  AgentTool,
  DelegateCapability,
  EditablePolicy,
  SubAgentOutcome,
  ToolContext,
  ToolLimits,
  ToolResult,
  ToolSpec,
} from './types.js';
export { readFileTool } from './read-file.js';
export { writeFileTool } from './write-file.js';
export { editFileTool } from './edit-file.js';
export { listFilesTool } from './list-files.js';
export { searchTool } from './search.js';
export { runCommandTool } from './run-command.js';
export { delegateTool } from './delegate.js';
export { resolveWorkspacePath, shellQuote } from './workspace-path.js';
