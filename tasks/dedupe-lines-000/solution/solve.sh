#!/bin/bash
awk '!seen[$0]++' /app/prism.txt > /app/prism_unique.txt
