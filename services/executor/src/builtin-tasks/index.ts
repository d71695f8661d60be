/**
 * The task types every executor loads unless `SLUICE_TASK_MODULES` names others.
 */
export { researchBrief } from './research-brief.js';
