"""The model-task zone: copied whole into every model task (the agent's environment and
the verifier). It imports only ``posttrainbench.core`` of this package.
"""
