// Barrel of the schedule search: the named multi-GPU operators as CommIR schedules, the
// analytic cost model, Mercury's auto-tuner and Algorithm 1's inter-operator resharding.
export {
  attentionProgram,
  gemmProgram,
  tileOuter,
  ringAttention,
  ulyssesAttention,
  uspAttention,
  treeAttention,
  asyncTpGemm,
  signature,
  type AttentionShape,
  type ScheduleSignature,
} from "./schedules.js";
export {
  analyticCost,
  h100Cluster,
  levelLink,
  summarize,
  type CommTerm,
  type CostModel,
  type Hardware,
  type Link,
  type ScheduleSummary,
} from "./cost.js";
export { searchSchedules, meshFactorisations, containsSchedule, type Candidate, type SearchOptions, type SearchResult } from "./search.js";
export {
  searchResharding,
  alphaBetaReshard,
  type OperatorCandidate,
  type OperatorNode,
  type OperatorDag,
  type ReshardCost,
  type ReshardSearchOptions,
  type ReshardSearchResult,
} from "./reshard.js";
