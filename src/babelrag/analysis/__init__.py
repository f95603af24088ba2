"""Language-preference analysis: MLRS, structural priors, debiased DeLP, generator preference, gold availability."""
