#!/bin/bash
sed -n '9,13p' /app/river/sleepy_meadow.txt > /app/crow_excerpt.txt
