/**
 * The task types every executor loads unless `SLUICE_TASK_MODULES` names others.
 */
export { agentLoop } from './agent-loop.js';
export { documentIngestion } from './document-ingestion.js';
export { researchBrief } from './research-brief.js';
export { researchReport } from './research-report.js';
