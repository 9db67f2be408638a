#!/bin/bash
mkdir -p /app/lotus && printf '%s\n' 'swift reset eager topaz comet' 'warm magnet goblet bramble' > /app/lotus/hidden_sandal.txt
