#!/bin/bash
awk '!seen[$0]++' /app/drum.txt > /app/pine_unique.txt
