#!/bin/bash
mkdir -p /app/fern && printf '%s\n' 'canyon lively load read' 'goblet misty vivid' 'early print velvet' 'fig candle early scan maple' > /app/fern/golden_melon.txt
