#!/bin/bash
sed -n '3,11p' /app/river/sleepy_meadow.txt > /app/excerpt.txt
