#!/bin/bash
awk '!seen[$0]++' /app/pine.txt > /app/prism_unique.txt
