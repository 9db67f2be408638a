#!/bin/bash
awk '!seen[$0]++' /app/marble.txt > /app/unique.txt
